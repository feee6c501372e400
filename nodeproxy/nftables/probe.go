package nftables

import (
	"fmt"
	"maps"
	"net/netip"

	"github.com/google/nftables"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// probeTable is the table Probe creates and deletes in one transaction.
const probeTable = "portico-probe"

// Probe checks that the kernel has what this mode uses: nf_tables over netlink, a NAT base
// chain, a named verdict map keyed by address . protocol . port, and a numgen choice among
// endpoints through the endpoints map (numgen random mod N offset base : address . port) into a DNAT. It commits one transaction that creates a
// table "portico-probe" (ip family) with these and deletes it again, so nothing stays behind
// and traffic never meets it. The error says what failed; the agent turns it into a startup
// error (--proxy-mode=iptables is the way out).
func Probe() error {
	c, err := dial()
	if err != nil {
		return err
	}
	f := familyOf(rules.IPv4)
	t := &nftables.Table{Name: probeTable, Family: f.table}
	c.AddTable(t)
	prio := nftables.ChainPriorityNATDest
	ch := c.AddChain(&nftables.Chain{Name: "probe", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: prio})
	for _, m := range []string{mapServices, endpointMaps[0]} {
		if err := c.AddSet(f.namedSet(t, m), nil); err != nil {
			return fmt.Errorf("probing nf_tables: adding map %s: %w", m, err)
		}
	}
	tx := newTransaction(f)
	eps := map[string]string{}
	for i, a := range []string{"198.18.0.1", "198.18.0.2"} {
		eps[endpointKey(16, i)] = endpointValue(rules.Endpoint{IP: netip.MustParseAddr(a), Port: 80})
	}
	if err := tx.setElems(c, t, endpointMaps[0], false, maps.All(eps)); err != nil {
		return fmt.Errorf("probing nf_tables: %w", err)
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(f.loadServiceKey(), vmapLookup(mapServices))})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: f.dnatMap(endpointMaps[0], 16, 2)})
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("probing nf_tables (a table with a NAT chain, a concatenated verdict map and a numgen DNAT map): %w", err)
	}
	return nil
}
