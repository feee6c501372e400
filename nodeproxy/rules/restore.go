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
// With prev nil (a full sync) existing is what the kernel holds (ParseSave): every chain of next
// whose rules differ from the kernel's, or that the kernel lacks, is written, and every owned
// chain of existing that next does not have is flushed and deleted. The Builder renders rules in
// the form iptables-save prints them, so a chain nobody touched compares equal and a full sync
// without drift writes nothing; a form this iptables prints differently only costs a rewrite.
// With prev set (a partial sync: prev is what the last successful restore wrote) only chains
// whose rules differ from prev are written, and chains of prev that next lacks are deleted.
//
// In --noflush mode a ":CHAIN" line creates the chain or flushes it, and chains the input does not
// mention keep their rules, so the output is a transaction over exactly the chains it names. It
// returns nil when nothing changes.
func RestoreInput(prev, next *Ruleset, existing Saved) []byte {
	var buf bytes.Buffer
	for _, table := range tableOrder {
		want := next.Tables[table]
		var write []string
		for chain, rules := range want {
			if prev == nil {
				if have, ok := existing[table][chain]; !ok || !slices.Equal(have, rules) {
					write = append(write, chain)
				}
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
		for chain := range existing[table] {
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
		writeTable(&buf, table, write, want, del)
	}
	return orNil(buf.Bytes())
}

// writeTable appends one table's transaction: the chains of write are created or flushed and
// given their rules from rules, the chains of del are flushed and deleted.
func writeTable(buf *bytes.Buffer, table string, write []string, rules map[string][]string, del []string) {
	buf.WriteString("*" + table + "\n")
	for _, c := range write {
		buf.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range del {
		buf.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range write {
		for _, r := range rules[c] {
			buf.WriteString("-A " + c + " " + r + "\n")
		}
	}
	for _, c := range del {
		buf.WriteString("-X " + c + "\n")
	}
	buf.WriteString("COMMIT\n")
}

// orNil returns nil for empty restore input: nothing to restore.
func orNil(input []byte) []byte {
	if len(input) == 0 {
		return nil
	}
	return input
}

// ChainsWritten counts the chains restore input writes or deletes.
func ChainsWritten(input []byte) int {
	return bytes.Count(input, []byte("\n:"))
}

// WrittenChains names up to limit of the chains a restore input declares (written or deleted),
// for logs.
func WrittenChains(input []byte, limit int) []string {
	var names []string
	for rest := input; len(names) < limit; {
		i := bytes.Index(rest, []byte("\n:"))
		if i < 0 {
			break
		}
		rest = rest[i+2:]
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		names = append(names, string(rest[:end]))
	}
	return names
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
		writeTable(&buf, table, nil, nil, del)
	}
	return orNil(buf.Bytes())
}

// Saved is the kernel's state of one family as iptables-save prints it: table -> chain -> rules
// (the text after "-A CHAIN "), for the owned chains of the nat and filter tables and the
// built-in chains that hold the jumps. An owned chain without rules is present with none.
type Saved map[string]map[string][]string

// ParseSave reads `iptables-save` output.
func ParseSave(r io.Reader) (Saved, error) {
	builtin := map[string]bool{}
	for _, j := range Jumps() {
		builtin[j.Table+"/"+j.Chain] = true
	}
	out := Saved{}
	table := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case table != TableNAT && table != TableFilter:
		case strings.HasPrefix(line, ":"+Prefix):
			name, _, _ := strings.Cut(line[1:], " ")
			if out[table] == nil {
				out[table] = map[string][]string{}
			}
			if _, ok := out[table][name]; !ok {
				out[table][name] = []string{}
			}
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[len("-A "):], " ")
			if Owned(chain) || builtin[table+"/"+chain] {
				if out[table] == nil {
					out[table] = map[string][]string{}
				}
				out[table][chain] = append(out[table][chain], rule)
			}
		}
	}
	return out, sc.Err()
}

// OwnedChains is table -> owned chain names, sorted.
func (s Saved) OwnedChains() map[string][]string {
	out := map[string][]string{}
	for table, chains := range s {
		for c := range chains {
			if Owned(c) {
				out[table] = append(out[table], c)
			}
		}
		slices.Sort(out[table])
	}
	return out
}

// HasJump reports whether j is in its built-in chain, as iptables-save prints it.
func (s Saved) HasJump(j Jump) bool {
	return slices.Contains(s[j.Table][j.Chain], strings.Join(j.Spec, " "))
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
