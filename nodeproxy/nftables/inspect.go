package nftables

import (
	"fmt"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// Chains reads every nf_tables table of family f, whoever owns it, with the names of its
// chains (a table without chains is present with none). The agent reads it at startup to find
// another service proxy's rules (kube-proxy's table "kube-proxy", or iptables-nft's nat table
// holding kube-proxy's KUBE-SERVICES chain); it changes nothing.
func Chains(f rules.Family) (map[string][]string, error) {
	c, err := dial()
	if err != nil {
		return nil, err
	}
	fam := familyOf(f).table
	tables, err := c.ListTablesOfFamily(fam)
	if err != nil {
		return nil, fmt.Errorf("listing the %s tables: %w", f, err)
	}
	out := map[string][]string{}
	for _, t := range tables {
		out[t.Name] = []string{}
	}
	chains, err := c.ListChainsOfTableFamily(fam)
	if err != nil {
		return nil, fmt.Errorf("listing the %s chains: %w", f, err)
	}
	for _, ch := range chains {
		if ch.Table != nil {
			out[ch.Table.Name] = append(out[ch.Table.Name], ch.Name)
		}
	}
	return out, nil
}
