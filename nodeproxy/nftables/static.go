package nftables

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// baseChain is a chain hooked into netfilter.
type baseChain struct {
	name     string
	typ      nftables.ChainType
	hook     *nftables.ChainHook
	priority nftables.ChainPriority
}

// baseChains: DNAT at dstnat (-100) and masquerading at srcnat (100) as iptables' nat table;
// source ranges before DNAT (-110), so they see the LoadBalancer IP; rejects and drops of new
// connections just before the filter priority (-10), so they come before other tables'
// accepts of the same priority, and after DNAT, so that the node's own connections that
// externalTrafficPolicy: Local short-circuits to any endpoint are not dropped (as kube-proxy).
var baseChains = []baseChain{
	{chainNATPrerouting, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, -100},
	{chainNATOutput, nftables.ChainTypeNAT, nftables.ChainHookOutput, -100},
	{chainNATPostrouting, nftables.ChainTypeNAT, nftables.ChainHookPostrouting, 100},
	{chainFilterPre, nftables.ChainTypeFilter, nftables.ChainHookPrerouting, -110},
	{chainFilterOutput, nftables.ChainTypeFilter, nftables.ChainHookOutput, -110},
	{chainFilterOutputPost, nftables.ChainTypeFilter, nftables.ChainHookOutput, -10},
	{chainFilterInput, nftables.ChainTypeFilter, nftables.ChainHookInput, -10},
	{chainFilterForward, nftables.ChainTypeFilter, nftables.ChainHookForward, -10},
}

// namedSet describes one of the shared sets and maps.
func (f family) namedSet(t *nftables.Table, name string) *nftables.Set {
	s := &nftables.Set{Table: t, Name: name, IsMap: true, DataType: nftables.TypeVerdict, Concatenation: true}
	switch name {
	case mapServices, mapFirewall, mapNoEndpoints:
		s.KeyType = f.serviceKeyType()
	case mapNodePorts, mapNoEndpointPort:
		s.KeyType = nodePortKeyType
	case setHairpin:
		s.IsMap, s.DataType, s.KeyType = false, nftables.SetDatatype{}, hairpinType(f)
	}
	if isEndpointMap(name) {
		s.KeyType, s.DataType, s.Concatenation = nftables.TypeInteger, f.endpointType(), false
	}
	return s
}

var setNames = append(append([]string{}, elemMaps...), setHairpin)

// staticChains are the chains whose content depends on the configuration only (and on the
// NodePort addresses, read at each full sync).
func staticChains(cfg *config) map[string][]nrule {
	f := cfg.fam
	jump := func(c string) nrule { return nrule{text: "jump " + c, exprs: []expr.Any{verdict(expr.VerdictJump, c)}} }
	firewall := nrule{text: "ct state new daddr . l4proto . dport vmap @" + mapFirewall,
		exprs: append(append(ctStateNew(), f.loadServiceKey()...), vmapLookup(mapFirewall))}
	noEndpoints := nrule{text: "ct state new jump " + chainNoEndpoints, exprs: append(ctStateNew(), verdict(expr.VerdictJump, chainNoEndpoints))}
	out := map[string][]nrule{
		chainNATPrerouting:    {jump(chainServices)},
		chainNATOutput:        {jump(chainServices)},
		chainNATPostrouting:   {jump(chainMasquerading)},
		chainFilterPre:        {firewall},
		chainFilterOutput:     {firewall},
		chainFilterOutputPost: {noEndpoints},
		chainFilterInput:      {noEndpoints},
		chainFilterForward:    {noEndpoints},
		chainNodePorts: {{text: "l4proto . dport vmap @" + mapNodePorts,
			exprs: append(loadNodePortKey(), vmapLookup(mapNodePorts))}},
		chainMasquerading: {
			{text: "saddr . daddr @" + setHairpin + " masquerade", exprs: append(f.hairpinMatch(), &expr.Masq{})},
			{text: "mark unset return", exprs: append(markUnset(cfg.mark), verdict(expr.VerdictReturn, ""))},
			{text: "mark clear", exprs: clearMark(cfg.mark)},
			{text: "masquerade fully-random", exprs: []expr.Any{&expr.Masq{FullyRandom: true}}},
		},
		chainMark:   {{text: "mark set", exprs: setMark(cfg.mark)}},
		chainReject: {{text: "reject", exprs: f.reject()}},
		chainNoEndpoints: {
			{text: "daddr . l4proto . dport vmap @" + mapNoEndpoints, exprs: append(f.loadServiceKey(), vmapLookup(mapNoEndpoints))},
			{text: "fib daddr type local l4proto . dport vmap @" + mapNoEndpointPort,
				exprs: append(append(fibLocal(false), loadNodePortKey()...), vmapLookup(mapNoEndpointPort))},
		},
	}
	services := []nrule{{text: "daddr . l4proto . dport vmap @" + mapServices, exprs: append(f.loadServiceKey(), vmapLookup(mapServices))}}
	if !cfg.restricted {
		services = append(services, nrule{text: "fib daddr type local daddr != " + f.loopback.String() + " jump " + chainNodePorts,
			exprs: append(append(fibLocal(false), f.notLoopbackDst()...), verdict(expr.VerdictJump, chainNodePorts))})
	} else {
		for _, a := range cfg.nodePortAddrs {
			if f.Contains(a) {
				services = append(services, nrule{text: "daddr " + a.String() + " jump " + chainNodePorts,
					exprs: append(f.daddrIs(a, false), verdict(expr.VerdictJump, chainNodePorts))})
			}
		}
	}
	out[chainServices] = services
	if len(cfg.clusterCIDRs) > 0 {
		var rs []nrule
		for _, c := range cfg.clusterCIDRs {
			rs = append(rs, nrule{text: "saddr " + c.String() + " return", exprs: append(f.addrIn(true, c), verdict(expr.VerdictReturn, ""))})
		}
		out[chainMarkOff] = append(rs, nrule{text: "mark set", exprs: setMark(cfg.mark)})
	}
	return out
}
