// Package netfiltertest is a fake of the netfilter.Netfilter seam for unit tests of the agent's
// sync loop without root: an in-memory kernel that applies iptables-restore --noflush input,
// answers Save from what it holds, keeps the jump rules, records every call and fails on
// demand. It is imported by tests only; the real iptables is tested in network namespaces
// (nodeproxy/rules' round trip, e2e/suites/dataplane).
package netfiltertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// ErrInjected is the error of an injected failure.
var ErrInjected = errors.New("injected failure")

var _ netfilter.Netfilter = (*Fake)(nil)

// Fake is an in-memory netfilter of one family. The zero value is not usable; use New.
type Fake struct {
	mu sync.Mutex
	// tables is table -> chain -> rules (the text after "-A CHAIN "), for every chain, owned
	// or built-in.
	tables map[string]map[string][]string
	// Restores are the inputs of successful Restore calls; Saves counts Save calls.
	Restores [][]byte
	Saves    int
	// FailRestores makes the next n Restore calls fail with ErrInjected, changing nothing.
	FailRestores int
}

// New returns a Fake holding only the built-in chains, empty.
func New() *Fake {
	f := &Fake{tables: map[string]map[string][]string{}}
	for _, j := range rules.Jumps() {
		if f.tables[j.Table] == nil {
			f.tables[j.Table] = map[string][]string{}
		}
		f.tables[j.Table][j.Chain] = nil
	}
	return f
}

// Restore applies input as `iptables-restore --noflush` does: ":CHAIN" creates or flushes a
// chain, "-A" appends, "-X" deletes, and the transaction applies whole at COMMIT or not at all.
func (f *Fake) Restore(_ context.Context, input []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailRestores > 0 {
		f.FailRestores--
		return ErrInjected
	}
	next := f.clone()
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(input))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			if next[table] == nil {
				next[table] = map[string][]string{}
			}
		case line == "COMMIT":
			table = ""
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			next[table][name] = []string{}
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[len("-A "):], " ")
			if _, ok := next[table][chain]; !ok {
				return fmt.Errorf("line %q: no chain %s in %s", line, chain, table)
			}
			next[table][chain] = append(next[table][chain], rule)
		case strings.HasPrefix(line, "-X "):
			delete(next[table], strings.TrimPrefix(line, "-X "))
		case line == "":
		default:
			return fmt.Errorf("unexpected restore line %q", line)
		}
	}
	f.tables = next
	f.Restores = append(f.Restores, slices.Clone(input))
	return nil
}

// Save returns the owned chains and the jumps' built-in chains, as netfilter.Netfilter.Save.
func (f *Fake) Save(context.Context) (rules.Saved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Saves++
	var buf bytes.Buffer
	for table, chains := range f.tables {
		buf.WriteString("*" + table + "\n")
		for c := range chains {
			buf.WriteString(":" + c + " - [0:0]\n")
		}
		for c, rs := range chains {
			for _, r := range rs {
				buf.WriteString("-A " + c + " " + r + "\n")
			}
		}
		buf.WriteString("COMMIT\n")
	}
	return rules.ParseSave(&buf)
}

// EnsureJump inserts j first in its chain unless present.
func (f *Fake) EnsureJump(j rules.Jump) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	spec := strings.Join(j.Spec, " ")
	if slices.Contains(f.tables[j.Table][j.Chain], spec) {
		return nil
	}
	f.tables[j.Table][j.Chain] = append([]string{spec}, f.tables[j.Table][j.Chain]...)
	return nil
}

// DeleteJump removes j if present.
func (f *Fake) DeleteJump(j rules.Jump) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	spec := strings.Join(j.Spec, " ")
	f.tables[j.Table][j.Chain] = slices.DeleteFunc(f.tables[j.Table][j.Chain], func(r string) bool { return r == spec })
	return nil
}

// Chain returns a copy of a chain's rules and whether it exists.
func (f *Fake) Chain(table, chain string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.tables[table][chain]
	return slices.Clone(rs), ok
}

// SetChain replaces (or creates) a chain's rules, as another program editing the kernel would;
// nil rules delete the chain.
func (f *Fake) SetChain(table, chain string, rs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs == nil {
		delete(f.tables[table], chain)
		return
	}
	f.tables[table][chain] = slices.Clone(rs)
}

// Calls returns the number of successful restores and of saves so far.
func (f *Fake) Calls() (restores, saves int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Restores), f.Saves
}

func (f *Fake) clone() map[string]map[string][]string {
	out := make(map[string]map[string][]string, len(f.tables))
	for t, chains := range f.tables {
		out[t] = make(map[string][]string, len(chains))
		for c, rs := range chains {
			out[t][c] = slices.Clone(rs)
		}
	}
	return out
}
