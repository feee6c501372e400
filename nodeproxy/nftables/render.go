package nftables

import (
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables/expr"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// config is what rendering needs of the agent's settings, for one family.
type config struct {
	fam           family
	mark          uint32
	masqueradeAll bool
	clusterCIDRs  []netip.Prefix
	// nodePortAddrs restricts NodePorts to these addresses when restricted.
	restricted    bool
	nodePortAddrs []netip.Addr
	// endpointRange is the endpoints map of the balancing chain and the first key of its
	// range there, which holds at least n endpoints; the same while the chain exists and n fits.
	endpointRange func(chain string, n int) (set string, base uint32)
}

// nrule is one rule: its nft-like text (what is compared between syncs and logged) and its
// expressions. A rule choosing among several endpoints reads them from the endpoints map
// (their elements are the port's, so the rule does not change with them).
type nrule struct {
	text  string
	exprs []expr.Any
	// gotos (len > 1): the rule is numgen random mod len(gotos) into an anonymous verdict map
	// of gotos to these chains.
	gotos []string
	// aff is the affinity set the rule reads or updates (created with its chain).
	aff *affinity
}

// affinity is the dynamic set of the client addresses sent to one endpoint of a chain, with
// the Service's timeout. It is named after the endpoint, so that it lives as long as the
// endpoint does (a full sync keeps it with its clients) and goes with it.
type affinity struct {
	set     string
	timeout time.Duration
}

// portState is what one service port contributes: its own chains and its elements in the
// shared maps and in the endpoints maps, its local endpoints (hairpin), and whether a Local
// traffic policy finds no local endpoint.
type portState struct {
	chains                           map[string][]nrule
	elems                            []elem
	hairpin                          []netip.Addr
	noLocalExternal, noLocalInternal bool
}

// elem is one element a port wants in map m: key bytes and the verdict ("drop" or the chain to
// go to) or value bytes, as strings.
type elem struct{ m, k, v string }

// elem adds element key : v of map m. In a shared map the first wish for a key holds (an
// address can be both an externalIP and a LoadBalancer IP); the keys of the port's endpoints
// are unique (its chains' ranges).
func (p *portState) elem(m string, key []byte, v string) {
	if !isEndpointMap(m) {
		for _, e := range p.elems {
			if e.m == m && e.k == string(key) {
				return
			}
		}
	}
	p.elems = append(p.elems, elem{m: m, k: string(key), v: v})
}

// elemIndex finds the value of element k of map m in es: a scan for the few elements of most
// ports, a map for ports with many endpoints.
func elemIndex(es []elem) func(m, k string) (string, bool) {
	if len(es) <= 32 {
		return func(m, k string) (string, bool) {
			for _, e := range es {
				if e.k == k && e.m == m {
					return e.v, true
				}
			}
			return "", false
		}
	}
	idx := make(map[[2]string]string, len(es))
	for _, e := range es {
		idx[[2]string{e.m, e.k}] = e.v
	}
	return func(m, k string) (string, bool) {
		v, ok := idx[[2]string{m, k}]
		return v, ok
	}
}

// render turns one service port into its chains and elements, with the semantics of the
// iptables mode (package rules' doc.go): ClusterIP traffic balanced over the cluster-wide (or,
// with internalTrafficPolicy: Local, the local) endpoints, marked for masquerading from outside
// the cluster CIDRs; external traffic marked and balanced, or with externalTrafficPolicy: Local
// short-circuited for pods and the node and kept on local endpoints otherwise; rejects without
// endpoints, drops without local ones, source ranges before DNAT.
func render(cfg *config, sp *rules.ServicePort) *portState {
	f := cfg.fam
	cluster, local := sp.ClusterEndpoints(), sp.LocalEndpoints()
	p := &portState{chains: map[string][]nrule{}, elems: make([]elem, 0, len(cluster)+2)}
	for _, e := range local {
		p.hairpin = append(p.hairpin, e.IP)
	}

	// Internal traffic: the ClusterIP.
	if f.Contains(sp.ClusterIP) {
		k := serviceKey(sp.ClusterIP, sp.Protocol, sp.Port)
		internal := cluster
		if sp.InternalLocal {
			internal = local
		}
		switch {
		case len(cluster) == 0:
			p.elem(mapNoEndpoints, k, chainReject)
		case len(internal) == 0:
			p.elem(mapNoEndpoints, k, verdictDrop)
			p.noLocalInternal = true
		default:
			var rs []nrule
			if cfg.masqueradeAll {
				rs = append(rs, nrule{text: "jump " + chainMark, exprs: []expr.Any{verdict(expr.VerdictJump, chainMark)}})
			} else if len(cfg.clusterCIDRs) > 0 && !sp.InternalLocal {
				rs = append(rs, nrule{text: "jump " + chainMarkOff, exprs: []expr.Any{verdict(expr.VerdictJump, chainMarkOff)}})
			}
			rs = append(rs, balance(cfg, internal, sp, portChain(kindInternal, sp), p)...)
			name := portChain(kindInternal, sp)
			p.chains[name] = rs
			p.elem(mapServices, k, name)
		}
	}

	// External traffic: externalIPs, LoadBalancer IPs, the NodePort.
	var extKeys [][]byte
	var lbIPs []netip.Addr
	for _, ip := range sp.ExternalIPs {
		if f.Contains(ip) {
			extKeys = append(extKeys, serviceKey(ip, sp.Protocol, sp.Port))
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if f.Contains(ip) {
			extKeys = append(extKeys, serviceKey(ip, sp.Protocol, sp.Port))
			lbIPs = append(lbIPs, ip)
		}
	}
	if len(extKeys) == 0 && sp.NodePort == 0 {
		return p
	}
	if len(lbIPs) > 0 && (len(sp.SourceRanges) > 0 || sp.SourceRangesInvalid) {
		name := portChain(kindFirewall, sp)
		var rs []nrule
		if !sp.SourceRangesInvalid {
			for _, r := range sp.SourceRanges {
				if f.Contains(r.Addr()) {
					rs = append(rs, nrule{text: "saddr " + r.Masked().String() + " return",
						exprs: append(f.addrIn(true, r), verdict(expr.VerdictReturn, ""))})
				}
			}
		}
		rs = append(rs, nrule{text: "drop", exprs: []expr.Any{verdict(expr.VerdictDrop, "")}})
		p.chains[name] = rs
		for _, ip := range lbIPs {
			p.elem(mapFirewall, serviceKey(ip, sp.Protocol, sp.Port), name)
		}
	}
	var npKey []byte
	if sp.NodePort != 0 {
		npKey = nodePortKey(sp.Protocol, sp.NodePort)
	}
	switch {
	case len(cluster) == 0:
		for _, k := range extKeys {
			p.elem(mapNoEndpoints, k, chainReject)
		}
		if npKey != nil {
			p.elem(mapNoEndpointPort, npKey, chainReject)
		}
		return p
	case sp.ExternalLocal && len(local) == 0:
		// Not short-circuited and nowhere to go: dropped in filter, so that the load
		// balancer's health check fails over.
		p.noLocalExternal = true
		for _, k := range extKeys {
			p.elem(mapNoEndpoints, k, verdictDrop)
		}
		if npKey != nil {
			p.elem(mapNoEndpointPort, npKey, verdictDrop)
		}
	}
	name := portChain(kindExternal, sp)
	var rs []nrule
	if sp.ExternalLocal {
		clu := portChain(kindCluster, sp)
		p.chains[clu] = balance(cfg, cluster, sp, clu, p)
		for _, c := range cfg.clusterCIDRs {
			rs = append(rs, nrule{text: "saddr " + c.String() + " goto " + clu,
				exprs: append(f.addrIn(true, c), verdict(expr.VerdictGoto, clu))})
		}
		rs = append(rs,
			nrule{text: "fib saddr type local jump " + chainMark, exprs: append(fibLocal(true), verdict(expr.VerdictJump, chainMark))},
			nrule{text: "fib saddr type local goto " + clu, exprs: append(fibLocal(true), verdict(expr.VerdictGoto, clu))})
		if len(local) > 0 {
			rs = append(rs, balance(cfg, local, sp, name, p)...)
		}
	} else {
		rs = append([]nrule{{text: "jump " + chainMark, exprs: []expr.Any{verdict(expr.VerdictJump, chainMark)}}}, balance(cfg, cluster, sp, name, p)...)
	}
	p.chains[name] = rs
	for _, k := range extKeys {
		p.elem(mapServices, k, name)
	}
	if npKey != nil {
		p.elem(mapNodePorts, npKey, name)
	}
	return p
}

// balance DNATs to one of eps (at least one), chosen at random. With ClientIP affinity (as
// kube-proxy's nftables mode), each endpoint gets a chain (chain/<hash of the endpoint>, added
// to p) that records the client in the endpoint's affinity set and DNATs; a client in one of
// the sets goes back to that endpoint's chain, any other to one of them at random.
func balance(cfg *config, eps []rules.Endpoint, sp *rules.ServicePort, chain string, p *portState) []nrule {
	f := cfg.fam
	if sp.AffinitySeconds <= 0 {
		if len(eps) == 1 {
			return []nrule{{text: "dnat to " + eps[0].String(), exprs: f.dnatOne(eps[0])}}
		}
		set, base := cfg.endpointRange(chain, len(eps))
		for i, e := range eps {
			p.elems = append(p.elems, elem{m: set, k: endpointKey(base, i), v: endpointValue(e)})
		}
		return []nrule{{text: fmt.Sprintf("dnat to numgen random mod %d offset %d map @%s", len(eps), base, set),
			exprs: f.dnatMap(set, base, len(eps))}}
	}
	timeout := time.Duration(sp.AffinitySeconds) * time.Second
	var out []nrule
	var gotos []string
	for _, e := range eps {
		ep := fmt.Sprintf("%s/%08x", chain, crc32.ChecksumIEEE([]byte(e.String())))
		a := &affinity{set: "aff-" + ep, timeout: timeout}
		p.chains[ep] = []nrule{{text: fmt.Sprintf("update @%s { saddr } timeout %s dnat to %s", a.set, timeout, e),
			exprs: append(f.remember(a.set, timeout), f.dnatOne(e)...), aff: a}}
		out = append(out, nrule{text: "saddr @" + a.set + " goto " + ep,
			exprs: append(f.saddrIn(a.set), verdict(expr.VerdictGoto, ep)), aff: a})
		gotos = append(gotos, ep)
	}
	if len(gotos) == 1 {
		return append(out, nrule{text: "goto " + gotos[0], exprs: []expr.Any{verdict(expr.VerdictGoto, gotos[0])}})
	}
	return append(out, nrule{text: fmt.Sprintf("numgen random mod %d vmap { %s }", len(gotos), strings.Join(gotos, ", ")), gotos: gotos})
}

// sameRules reports whether two chains' rules are the same.
func sameRules(a, b []nrule) bool {
	return slices.EqualFunc(a, b, func(x, y nrule) bool { return x.text == y.text })
}

// describe prints a chain's rules (logs, tests).
func describe(rs []nrule) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.text)
		b.WriteByte('\n')
	}
	return b.String()
}
