package nftables

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
)

// elemChunk bounds the elements of one netlink message: their nested attribute must stay
// under 64 KiB.
const elemChunk = 256

// socketBuffer is the netlink socket's send and receive buffer: a full sync is one batch of
// thousands of messages.
const socketBuffer = 64 << 20

// transaction collects one sync's changes to a family's table and applies them in one
// netlink batch, which the kernel commits atomically or not at all.
type transaction struct {
	fam      family
	writes   map[string]chainWrite
	deletes  map[string][]nrule // chain -> its rules before
	elemAdds map[string]map[string]string
	elemDels map[string]map[string]bool
	// objects counts chains, rules and elements written or deleted.
	objects int
	// whole: the transaction will write the whole table (commitFull), so the differences
	// (writes, deletes, element changes) are not recorded.
	whole bool
}

type chainWrite struct {
	old, rules []nrule
	existed    bool
}

func newTransaction(f family) *transaction {
	return &transaction{fam: f, writes: map[string]chainWrite{}, deletes: map[string][]nrule{},
		elemAdds: map[string]map[string]string{}, elemDels: map[string]map[string]bool{}}
}

func (tx *transaction) writeChain(name string, old, rs []nrule, existed bool) {
	if tx.whole {
		return
	}
	tx.writes[name] = chainWrite{old: old, rules: rs, existed: existed}
}

func (tx *transaction) deleteChain(name string, old []nrule) {
	if !tx.whole {
		tx.deletes[name] = old
	}
}

// affinitySets are the affinity maps rs use, by name.
func affinitySets(rs []nrule) map[string]*affinity {
	out := map[string]*affinity{}
	for _, r := range rs {
		if r.aff != nil {
			out[r.aff.set] = r.aff
		}
	}
	return out
}

func (tx *transaction) addElem(m, key, v string) {
	if tx.whole {
		return
	}
	if tx.elemAdds[m] == nil {
		tx.elemAdds[m] = map[string]string{}
	}
	tx.elemAdds[m][key] = v
}

func (tx *transaction) deleteElem(m, key string) {
	if tx.whole {
		return
	}
	if tx.elemAdds[m] != nil {
		if _, ok := tx.elemAdds[m][key]; ok {
			// Added earlier in this transaction: not in the kernel yet.
			delete(tx.elemAdds[m], key)
			return
		}
	}
	if tx.elemDels[m] == nil {
		tx.elemDels[m] = map[string]bool{}
	}
	tx.elemDels[m][key] = true
}

func (tx *transaction) empty() bool {
	n := len(tx.writes) + len(tx.deletes)
	for _, m := range tx.elemAdds {
		n += len(m)
	}
	for _, m := range tx.elemDels {
		n += len(m)
	}
	return n == 0
}

// dial opens a netlink connection to nf_tables with buffers large enough for a full sync.
func dial(opts ...nftables.ConnOption) (*nftables.Conn, error) {
	// Best effort: without the buffers a large transaction fails with ENOBUFS, reported by the
	// commit itself.
	c, err := nftables.New(append(opts, nftables.WithSockOptions(func(nc *netlink.Conn) error {
		_ = setBuffers(nc)
		return nil
	}))...)
	if err != nil {
		return nil, fmt.Errorf("opening nf_tables netlink connection: %w", err)
	}
	return c, nil
}

func (tx *transaction) table() *nftables.Table {
	return &nftables.Table{Name: TableName, Family: tx.fam.table}
}

// commitPartial builds on c the recorded differences: element deletions, chain (re)writes,
// element additions, then the chains no longer used, all flushed before any is deleted
// (conns.send sends them).
func (tx *transaction) commitPartial(c *nftables.Conn) error {
	if tx.empty() {
		return nil
	}
	t := tx.table()
	for _, m := range slices.Sorted(maps.Keys(tx.elemDels)) {
		if err := tx.setElems(c, t, m, true, keysOf(tx.elemDels[m])); err != nil {
			return err
		}
	}
	// Affinity sets: created before the rules that use them, deleted after the last rule using
	// them went (a set is used by several chains of its port).
	before, after := map[string]*affinity{}, map[string]*affinity{}
	for _, w := range tx.writes {
		maps.Copy(before, affinitySets(w.old))
		maps.Copy(after, affinitySets(w.rules))
	}
	for _, old := range tx.deletes {
		maps.Copy(before, affinitySets(old))
	}
	for _, set := range slices.Sorted(maps.Keys(after)) {
		if before[set] == nil {
			if err := c.AddSet(tx.fam.affinitySet(t, after[set]), nil); err != nil {
				return fmt.Errorf("adding affinity set %s: %w", set, err)
			}
		}
	}
	// Every new chain exists before any rule (of another chain) jumps to it.
	written := slices.Sorted(maps.Keys(tx.writes))
	for _, name := range written {
		ch := &nftables.Chain{Name: name, Table: t}
		if tx.writes[name].existed {
			c.FlushChain(ch)
		} else {
			c.AddChain(ch)
		}
		tx.objects++
	}
	for _, name := range written {
		if err := tx.addRules(c, &nftables.Chain{Name: name, Table: t}, tx.writes[name].rules); err != nil {
			return err
		}
	}
	for _, m := range slices.Sorted(maps.Keys(tx.elemAdds)) {
		if err := tx.setElems(c, t, m, false, maps.All(tx.elemAdds[m])); err != nil {
			return err
		}
	}
	// The chains no longer used: every one of them is flushed before any is deleted. A chain
	// still jumped to cannot be deleted (EBUSY), and deleted chains jump to each other (an
	// externalTrafficPolicy: Local port's ext- chain to its clu- chain, which sorts first): the
	// kernel releases a jump's reference when its rule goes, so once all their rules went (and
	// the map elements pointing at them, deleted first above) nothing refers to them.
	gone := slices.Sorted(maps.Keys(tx.deletes))
	for _, name := range gone {
		c.FlushChain(&nftables.Chain{Name: name, Table: t})
	}
	for _, name := range gone {
		c.DelChain(&nftables.Chain{Name: name, Table: t})
		tx.objects++
	}
	for _, set := range slices.Sorted(maps.Keys(before)) {
		if after[set] == nil {
			c.DelSet(&nftables.Set{Name: set, Table: t})
		}
	}
	return nil
}

// commitFull builds on c the whole table as p holds it (list lists the table as it is): every
// existing chain and map of the table is flushed and rewritten, chains and sets the agent no
// longer wants are deleted, in one transaction (so traffic never sees a half-written table).
// Whatever else changed the table (drift) is undone.
func (tx *transaction) commitFull(c, list *nftables.Conn, p *familyProxier) error {
	t := tx.table()
	chains := staticChains(&p.cfg)
	for _, ps := range p.ports {
		for name, rs := range ps.chains {
			chains[name] = rs
		}
	}
	existingChains, existingSets, err := listTable(list, t)
	if err != nil {
		return err
	}
	affSets := map[string]*affinity{}
	for _, rs := range chains {
		maps.Copy(affSets, affinitySets(rs))
	}
	c.AddTable(t)
	for _, name := range existingChains {
		c.FlushChain(&nftables.Chain{Name: name, Table: t})
	}
	for _, name := range existingSets {
		if affSets[name] != nil {
			delete(affSets, name) // kept with its clients: same name, same endpoints
			continue
		}
		if slices.Contains(setNames, name) {
			c.FlushSet(&nftables.Set{Name: name, Table: t})
		} else {
			c.DelSet(&nftables.Set{Name: name, Table: t})
		}
	}
	for _, name := range existingChains {
		if _, ok := chains[name]; !ok {
			c.DelChain(&nftables.Chain{Name: name, Table: t})
		}
	}
	isBase := map[string]bool{}
	for _, b := range baseChains {
		prio := b.priority
		c.AddChain(&nftables.Chain{Name: b.name, Table: t, Type: b.typ, Hooknum: b.hook, Priority: &prio})
		isBase[b.name] = true
	}
	names := slices.Sorted(maps.Keys(chains))
	for _, name := range names {
		if !isBase[name] {
			c.AddChain(&nftables.Chain{Name: name, Table: t})
		}
	}
	tx.objects += len(names)
	for _, a := range affSets {
		if err := c.AddSet(tx.fam.affinitySet(t, a), nil); err != nil {
			return fmt.Errorf("adding affinity set %s: %w", a.set, err)
		}
	}
	for _, m := range setNames {
		if err := c.AddSet(tx.fam.namedSet(t, m), nil); err != nil {
			return fmt.Errorf("adding set %s: %w", m, err)
		}
		if isEndpointMap(m) {
			continue // after the rules, below
		}
		all := p.elems[m]
		if m == setHairpin {
			all = map[string]string{}
			for ip := range p.hairpin {
				all[string(hairpinKey(ip))] = ""
			}
		}
		if err := tx.setElems(c, t, m, false, maps.All(all)); err != nil {
			return err
		}
	}
	for _, name := range names {
		if err := tx.addRules(c, &nftables.Chain{Name: name, Table: t}, chains[name]); err != nil {
			return err
		}
	}
	// The endpoints go in last: the kernel checks every element of a map each time a rule of
	// another chain starts using it, so filling it before the rules that read it made a full
	// sync quadratic (95 s instead of seconds at 10,000 Services x 10).
	eps := make([][]elem, endpointShards)
	for _, ps := range p.ports {
		for _, e := range ps.elems {
			if i, ok := endpointMapIndex[e.m]; ok {
				eps[i] = append(eps[i], e)
			}
		}
	}
	for i, m := range endpointMaps {
		if err := tx.setElems(c, t, m, false, elemsOf(eps[i])); err != nil {
			return err
		}
	}
	return nil
}

// listTable lists the names of the table's chains and named sets (none when it does not exist).
func listTable(c *nftables.Conn, t *nftables.Table) (chains, sets []string, err error) {
	tables, err := c.ListTablesOfFamily(t.Family)
	if err != nil {
		return nil, nil, fmt.Errorf("listing tables: %w", err)
	}
	if !slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == t.Name }) {
		return nil, nil, nil
	}
	all, err := c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return nil, nil, fmt.Errorf("listing chains: %w", err)
	}
	for _, ch := range all {
		if ch.Table.Name == t.Name {
			chains = append(chains, ch.Name)
		}
	}
	ss, err := c.GetSets(t)
	if err != nil {
		return nil, nil, fmt.Errorf("listing sets: %w", err)
	}
	for _, s := range ss {
		if !s.Anonymous && !strings.HasPrefix(s.Name, "__") {
			sets = append(sets, s.Name)
		}
	}
	return chains, sets, nil
}

// setElems deletes (del) or adds the elements es (key : verdict or value) of the named set m,
// elemChunk elements per message. One chunk's elements and their bytes are built in buffers
// reused for the next chunk (the library marshals them into the message at once): a full sync
// at 10,000 Services adds 110,000 elements.
func (tx *transaction) setElems(c *nftables.Conn, t *nftables.Table, m string, del bool, es iter.Seq2[string, string]) error {
	set := tx.fam.namedSet(t, m)
	elems := make([]nftables.SetElement, 0, elemChunk)
	var buf []byte
	send := func() error {
		if len(elems) == 0 {
			return nil
		}
		var err error
		if del {
			err = c.SetDeleteElements(set, elems)
		} else {
			err = c.SetAddElements(set, elems)
		}
		if err != nil {
			return fmt.Errorf("elements of %s: %w", m, err)
		}
		tx.objects += len(elems)
		elems, buf = elems[:0], buf[:0]
		return nil
	}
	bytesOf := func(s string) []byte {
		buf = append(buf, s...)
		return buf[len(buf)-len(s) : len(buf) : len(buf)]
	}
	for k, v := range es {
		e := nftables.SetElement{Key: bytesOf(k)}
		switch {
		case del, m == setHairpin:
		case isEndpointMap(m):
			e.Val = bytesOf(v)
		case v == verdictDrop:
			e.VerdictData = &expr.Verdict{Kind: expr.VerdictDrop}
		default:
			e.VerdictData = &expr.Verdict{Kind: expr.VerdictGoto, Chain: v}
		}
		elems = append(elems, e)
		if len(elems) == elemChunk {
			if err := send(); err != nil {
				return err
			}
		}
	}
	return send()
}

// keysOf iterates the keys of a set of keys (with empty values).
func keysOf(keys map[string]bool) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for k := range keys {
			if !yield(k, "") {
				return
			}
		}
	}
}

// elemsOf iterates the keys and values of es.
func elemsOf(es []elem) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, e := range es {
			if !yield(e.k, e.v) {
				return
			}
		}
	}
}

// addRules appends rs to ch; a rule choosing among chains (affinity) gets its anonymous map.
func (tx *transaction) addRules(c *nftables.Conn, ch *nftables.Chain, rs []nrule) error {
	for _, r := range rs {
		exprs := r.exprs
		if len(r.gotos) > 1 {
			set := &nftables.Set{Table: ch.Table, Anonymous: true, Constant: true, IsMap: true,
				KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
			elems := make([]nftables.SetElement, len(r.gotos))
			for i, g := range r.gotos {
				elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)),
					VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: g}}
			}
			if err := c.AddSet(set, elems); err != nil {
				return fmt.Errorf("adding endpoint map of %s: %w", ch.Name, err)
			}
			exprs = numgenVmap(set, len(r.gotos))
		}
		c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: exprs})
		tx.objects++
	}
	return nil
}
