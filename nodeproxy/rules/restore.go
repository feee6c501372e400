package rules

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"strings"
)

// tableOrder is the order tables appear in restore input.
var tableOrder = []string{TableFilter, TableNAT}

// RestoreInput renders the `iptables-restore --noflush` input that turns the kernel's owned
// chains into next.
//
// With prev nil (a full sync) every chain of next is written, and every chain listed in existing
// (table -> owned chains found in the kernel) that next does not have is flushed and deleted.
// With prev set (a partial sync: prev is what the last successful restore wrote) only chains
// whose rules differ are written, and chains of prev that next lacks are deleted.
//
// In --noflush mode a ":CHAIN" line creates the chain or flushes it, and chains the input does not
// mention keep their rules, so the output is a transaction over exactly the chains it names. It
// returns nil when nothing changes.
func RestoreInput(prev, next *Ruleset, existing map[string][]string) []byte {
	var buf bytes.Buffer
	for _, table := range tableOrder {
		want := next.Tables[table]
		var write []string
		for chain, rules := range want {
			if prev == nil {
				write = append(write, chain)
				continue
			}
			old, ok := prev.Tables[table][chain]
			if !ok || !sameRules(old, rules) {
				write = append(write, chain)
			}
		}
		stale := map[string]bool{}
		if prev != nil {
			for chain := range prev.Tables[table] {
				if _, ok := want[chain]; !ok {
					stale[chain] = true
				}
			}
		}
		for _, chain := range existing[table] {
			if _, ok := want[chain]; !ok && Owned(chain) {
				stale[chain] = true
			}
		}
		if len(write) == 0 && len(stale) == 0 {
			continue
		}
		slices.Sort(write)
		del := make([]string, 0, len(stale))
		for c := range stale {
			del = append(del, c)
		}
		slices.Sort(del)

		buf.WriteString("*" + table + "\n")
		for _, c := range write {
			buf.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range del {
			buf.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range write {
			for _, r := range want[c] {
				buf.WriteString("-A " + c + " " + r + "\n")
			}
		}
		for _, c := range del {
			buf.WriteString("-X " + c + "\n")
		}
		buf.WriteString("COMMIT\n")
	}
	if buf.Len() == 0 {
		return nil
	}
	return buf.Bytes()
}

// sameRules compares two chains' rules; chains the Builder did not reassemble share their
// backing array, which settles it at once.
func sameRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// CleanupInput flushes and deletes every owned chain listed in existing (table -> chains). The
// jump rules in the built-in chains must be gone first.
func CleanupInput(existing map[string][]string) []byte {
	var buf bytes.Buffer
	for _, table := range tableOrder {
		var del []string
		for _, c := range existing[table] {
			if Owned(c) {
				del = append(del, c)
			}
		}
		if len(del) == 0 {
			continue
		}
		slices.Sort(del)
		buf.WriteString("*" + table + "\n")
		for _, c := range del {
			buf.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range del {
			buf.WriteString("-X " + c + "\n")
		}
		buf.WriteString("COMMIT\n")
	}
	if buf.Len() == 0 {
		return nil
	}
	return buf.Bytes()
}

// ParseSaveChains reads `iptables-save` output and returns table -> owned chain names.
func ParseSaveChains(r io.Reader) (map[string][]string, error) {
	out := map[string][]string{}
	table := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"+Prefix):
			name, _, _ := strings.Cut(line[1:], " ")
			out[table] = append(out[table], name)
		}
	}
	return out, sc.Err()
}

// Jump is a rule the agent keeps in a built-in chain, pointing into its own chains.
type Jump struct {
	Table, Chain string
	// Spec is the rule, as go-iptables takes it.
	Spec []string
}

// Jumps are the rules in the built-in chains, one per chain, each inserted first. They are
// identical for both families.
func Jumps() []Jump {
	c := []string{"-m", "comment", "--comment", JumpComment}
	newConn := []string{"-m", "conntrack", "--ctstate", "NEW"}
	j := func(table, chain string, target string, extra ...string) Jump {
		spec := append(append(append([]string{}, extra...), c...), "-j", target)
		return Jump{Table: table, Chain: chain, Spec: spec}
	}
	return []Jump{
		j(TableNAT, "PREROUTING", ChainServices),
		j(TableNAT, "OUTPUT", ChainServices),
		j(TableNAT, "POSTROUTING", ChainPostrouting),
		j(TableFilter, "INPUT", ChainServices, newConn...),
		j(TableFilter, "FORWARD", ChainForward),
		j(TableFilter, "OUTPUT", ChainServices, newConn...),
	}
}
