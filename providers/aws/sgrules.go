package aws

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// The security-group rules a load balancer needs, computed without any AWS call: its own
// groups' rules (the source ranges), the node rules of an NLB without groups, and how many
// groups of maxRulesPerGroup rules they take. securitygroups.go converges them.

// nlbFrontendRules are the ingress rules of an NLB's own security groups: every listener port
// and protocol, and ICMP "fragmentation needed", from the source ranges.
func nlbFrontendRules(d desiredLB) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	for _, l := range d.NLB.Listeners {
		for _, proto := range transportProtocols(l.Protocol) {
			for _, c := range d.SourceCIDRs {
				r := sgRule{Protocol: proto, From: l.Port, To: l.Port, CIDR: c, Purpose: "client"}
				if !seen[r.key()] {
					seen[r.key()] = true
					rules = append(rules, r)
				}
			}
		}
	}
	return append(rules, mtuRules(d.SourceCIDRs, seen)...)
}

// classicRules are the ingress rules of a Classic ELB's own security group: every listener port
// and ICMP "fragmentation needed" from the source ranges.
func classicRules(d desiredLB) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	for _, l := range d.Classic.Listeners {
		for _, c := range d.SourceCIDRs {
			r := sgRule{Protocol: "tcp", From: l.Port, To: l.Port, CIDR: c, Purpose: "client"}
			if !seen[r.key()] {
				seen[r.key()] = true
				rules = append(rules, r)
			}
		}
	}
	return append(rules, mtuRules(d.SourceCIDRs, seen)...)
}

// nlbNodeRules are the node security-group rules an NLB without security groups needs: client
// traffic to every node port from the source ranges, health checks from the load balancer's
// subnets, and ICMP "fragmentation needed" (path MTU discovery) from the source ranges.
func nlbNodeRules(d desiredLB, subnetCIDRs []netip.Prefix) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	add := func(r sgRule) {
		if !seen[r.key()] {
			seen[r.key()] = true
			rules = append(rules, r)
		}
	}
	for _, l := range d.NLB.Listeners {
		for _, proto := range transportProtocols(l.TG.Protocol) {
			for _, c := range d.SourceCIDRs {
				add(sgRule{Protocol: proto, From: l.TG.Port, To: l.TG.Port, CIDR: c, Purpose: "client"})
			}
		}
	}
	for _, l := range d.NLB.Listeners {
		port := l.TG.Port
		if l.TG.HC.Port != trafficPort {
			n, _ := strconv.Atoi(l.TG.HC.Port)
			port = int32(n)
		}
		for _, c := range subnetCIDRs {
			add(sgRule{Protocol: "tcp", From: port, To: port, CIDR: c, Purpose: "health"})
		}
	}
	rules = append(rules, mtuRules(d.SourceCIDRs, seen)...)
	return rules
}

func mtuRules(cidrs []netip.Prefix, seen map[string]bool) []sgRule {
	var out []sgRule
	for _, c := range cidrs {
		r := sgRule{Protocol: "icmp", From: 3, To: 4, CIDR: c, Purpose: "mtu"}
		if c.Addr().Is6() {
			r = sgRule{Protocol: "icmpv6", From: 2, To: 0, CIDR: c, Purpose: "mtu"}
		}
		if !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, r)
		}
	}
	return out
}

func transportProtocols(tgProtocol string) []string {
	switch tgProtocol {
	case "UDP":
		return []string{"udp"}
	case "TCP_UDP":
		return []string{"tcp", "udp"}
	}
	return []string{"tcp"}
}

// splitRules packs rules into as few groups of at most limit rules as it can, keeping the
// rules of one source together while a source fits in a group, in a stable order (sources
// sorted), so that the same rules always land in the same groups.
func splitRules(rules []sgRule, limit int) [][]sgRule {
	bySource := map[string][]sgRule{}
	for _, r := range rules {
		src := r.Group
		if src == "" {
			src = r.CIDR.String()
		}
		bySource[src] = append(bySource[src], r)
	}
	var out [][]sgRule
	var cur []sgRule
	for _, src := range sortedKeys(bySource) {
		rs := bySource[src]
		slices.SortFunc(rs, func(a, b sgRule) int { return strings.Compare(a.key(), b.key()) })
		if len(cur)+len(rs) > limit && len(cur) > 0 {
			out = append(out, cur)
			cur = nil
		}
		for len(rs) > limit-len(cur) {
			k := limit - len(cur)
			cur = append(cur, rs[:k]...)
			out = append(out, cur)
			cur, rs = nil, rs[k:]
		}
		cur = append(cur, rs...)
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// checkClassicGroups rejects source ranges that need more own security groups than a Classic
// ELB can take besides its extra groups and the backend group.
func checkClassicGroups(d desiredLB) error {
	backend := 0
	if d.ManageNodeRules {
		backend = 1
	}
	if given := len(d.Classic.SecurityGroups); given > 0 {
		if n := given + len(d.Classic.ExtraSecurityGroups) + backend; n > maxClassicGroups {
			return providers.Invalid("metadata.annotations["+annotations.AWSSecurityGroups+"]", "%d security groups, %d extra ones and the cluster's backend group make %d; a Classic ELB takes at most %d", given, len(d.Classic.ExtraSecurityGroups), n, maxClassicGroups)
		}
		return nil
	}
	n := len(splitRules(classicRules(d), maxRulesPerGroup))
	if room := maxClassicGroups - len(d.Classic.ExtraSecurityGroups) - backend; n > room {
		return providers.Invalid("spec.loadBalancerSourceRanges", "%d source ranges need %d rules, %d security groups of %d rules; a Classic ELB takes at most %d groups, %d of them given as extra groups and %d the cluster's backend group: shorten the list",
			len(d.SourceCIDRs), len(classicRules(d)), n, maxRulesPerGroup, maxClassicGroups, len(d.Classic.ExtraSecurityGroups), backend)
	}
	return nil
}

// checkNLBGroups rejects source ranges that need more own security groups than an NLB can take
// besides the backend group.
func checkNLBGroups(d desiredLB) error {
	n := len(splitRules(nlbFrontendRules(d), maxRulesPerGroup))
	if room := maxNLBGroups - 1; n > room {
		return providers.Invalid("spec.loadBalancerSourceRanges", "%d source ranges need %d rules, %d security groups of %d rules; an NLB takes at most %d groups, one of them the cluster's backend group: shorten the list",
			len(d.SourceCIDRs), len(nlbFrontendRules(d)), n, maxRulesPerGroup, maxNLBGroups)
	}
	return nil
}
