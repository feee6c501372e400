package rules

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Table names.
const (
	TableNAT    = "nat"
	TableFilter = "filter"
)

// Ruleset is the complete desired content of every chain the agent owns in one family: table ->
// chain -> rule specifications (the text after "-A CHAIN ").
type Ruleset struct {
	Family Family
	Tables map[string]map[string][]string
}

// RuleCount is the number of rules in table.
func (r *Ruleset) RuleCount(table string) int {
	n := 0
	for _, rules := range r.Tables[table] {
		n += len(rules)
	}
	return n
}

// Builder renders service ports into a Ruleset. It keeps each port's rendered rules, so after a
// change only the changed ports are rendered again; everything it does is pure computation.
type Builder struct {
	cfg   Config
	ports map[string]*portRules
	// shared caches the assembled bucket chains (PTC-SVC-*, PTC-NP-*): members lists the ports
	// with rules in each, dirty the chains to assemble again on the next Ruleset.
	shared  map[string][]string
	members map[string]map[string]bool
	dirty   map[string]bool
	// keys are the keys of ports, sorted, kept up to date once Ruleset has sorted them (nil:
	// not yet).
	keys []string
}

// portRules is one service port rendered.
type portRules struct {
	// nat holds the port's rules in shared nat chains (SVC buckets, NP buckets), in order.
	nat []fragment
	// filter holds the rejects and drops of the port, sourceRanges its source-range returns
	// and drops, accepts its health-check accept. Every port's rejects and drops come first:
	// a source range's RETURN leaves the chain, and must not skip the drop of an
	// externalTrafficPolicy: Local port without a local endpoint (kube-proxy drops such
	// traffic whatever its source). Then every port's source ranges, before any accept.
	filter, sourceRanges, accepts []string
	// chains are the port's own nat chains (externalTrafficPolicy: Local only).
	chains map[string][]string
	// hairpin are the local endpoint IPs, which need masquerading when they reach themselves.
	hairpin []netip.Addr
	// noLocalExternal is true when an externalTrafficPolicy: Local port has endpoints but none
	// here; noLocalInternal the same for internalTrafficPolicy: Local.
	noLocalExternal, noLocalInternal bool
}

type fragment struct {
	chain string
	rules []string
}

// NewBuilder returns a Builder with no service ports.
func NewBuilder(cfg Config) *Builder {
	return &Builder{cfg: cfg, ports: map[string]*portRules{},
		shared: map[string][]string{}, members: map[string]map[string]bool{}, dirty: map[string]bool{}}
}

// Set renders sp (of the Builder's family) and replaces what was rendered under its key.
func (b *Builder) Set(sp *ServicePort) {
	key := sp.Key()
	if _, ok := b.ports[key]; !ok && b.keys != nil {
		i, _ := slices.BinarySearch(b.keys, key)
		b.keys = slices.Insert(b.keys, i, key)
	}
	b.forget(key)
	p := b.render(sp)
	b.ports[key] = p
	for _, f := range p.nat {
		if b.members[f.chain] == nil {
			b.members[f.chain] = map[string]bool{}
		}
		b.members[f.chain][key] = true
		b.dirty[f.chain] = true
	}
}

// Delete forgets the service port with key.
func (b *Builder) Delete(key string) {
	if _, ok := b.ports[key]; ok && b.keys != nil {
		if i, found := slices.BinarySearch(b.keys, key); found {
			b.keys = slices.Delete(b.keys, i, i+1)
		}
	}
	b.forget(key)
}

func (b *Builder) forget(key string) {
	old, ok := b.ports[key]
	if !ok {
		return
	}
	for _, f := range old.nat {
		delete(b.members[f.chain], key)
		b.dirty[f.chain] = true
	}
	delete(b.ports, key)
}

// assemble rebuilds the dirty shared chains from their members, in key order.
func (b *Builder) assemble() {
	for chain := range b.dirty {
		keys := make([]string, 0, len(b.members[chain]))
		for k := range b.members[chain] {
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			delete(b.shared, chain)
			delete(b.members, chain)
			continue
		}
		slices.Sort(keys)
		var rules []string
		for _, k := range keys {
			for _, f := range b.ports[k].nat {
				if f.chain == chain {
					rules = append(rules, f.rules...)
				}
			}
		}
		b.shared[chain] = rules
	}
	clear(b.dirty)
}

// Len is the number of service ports held.
func (b *Builder) Len() int { return len(b.ports) }

// NoLocalEndpoints counts the ports whose external (externalTrafficPolicy: Local) or internal
// (internalTrafficPolicy: Local) traffic is dropped here: endpoints exist, none on this node.
func (b *Builder) NoLocalEndpoints() (external, internal int) {
	for _, p := range b.ports {
		if p.noLocalExternal {
			external++
		}
		if p.noLocalInternal {
			internal++
		}
	}
	return external, internal
}

// Ruleset assembles the current rules of every port into the complete desired ruleset.
func (b *Builder) Ruleset() *Ruleset {
	nat := map[string][]string{}
	filter := map[string][]string{}
	if b.keys == nil {
		// Sorting 10,000 keys costs milliseconds: a partial sync that only changes endpoints
		// reuses the order.
		b.keys = make([]string, 0, len(b.ports))
		for k := range b.ports {
			b.keys = append(b.keys, k)
		}
		slices.Sort(b.keys)
	}
	keys := b.keys

	b.assemble()
	for c, rules := range b.shared {
		nat[c] = rules
	}
	var drops, ranges, accepts []string
	hairpin := map[netip.Addr]bool{}
	for _, k := range keys {
		p := b.ports[k]
		for name, rules := range p.chains {
			nat[name] = rules
		}
		drops = append(drops, p.filter...)
		ranges = append(ranges, p.sourceRanges...)
		accepts = append(accepts, p.accepts...)
		for _, ip := range p.hairpin {
			hairpin[ip] = true
		}
	}

	// Dispatch: one rule per non-empty address bucket, then NodePorts.
	var services []string
	for i := range 256 {
		if c := bucketChain(byte(i)); nat[c] != nil {
			services = append(services, fmt.Sprintf("-d %s -j %s", b.bucketMatch(byte(i)), c))
		}
	}
	services = append(services, b.nodePortJumps()...)
	nat[ChainServices] = services
	nat[ChainNodePorts] = b.nodePortDispatch(nat)
	nat[ChainPostrouting] = b.postrouting(hairpin)
	if len(b.cfg.ClusterCIDRs) > 0 {
		nat[ChainMarkOffCluster] = b.markOffCluster()
	}

	filter[ChainServices] = slices.Concat(drops, ranges, accepts)
	filter[ChainForward] = []string{
		// One jump from FORWARD keeps the order fixed: the checks of new connections first,
		// then the accepts.
		"-m conntrack --ctstate NEW -j " + ChainServices,
		fmt.Sprintf("-m mark --mark %s -j ACCEPT", b.markMatch()),
		"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	}
	return &Ruleset{Family: b.cfg.Family, Tables: map[string]map[string][]string{TableNAT: nat, TableFilter: filter}}
}

// bucketMatch matches destinations whose last byte is i: a non-contiguous mask on the address,
// written as iptables-save prints it (IPv6 bucket 0 is "::/::ff", not "::0/::ff": a full sync
// compares the text).
func (b *Builder) bucketMatch(i byte) string {
	if b.cfg.Family == IPv6 {
		var v [16]byte
		v[15] = i
		return netip.AddrFrom16(v).String() + "/::ff"
	}
	return fmt.Sprintf("0.0.0.%d/0.0.0.255", i)
}

func (b *Builder) nodePortJumps() []string {
	if !b.cfg.NodePortsRestricted {
		loopback := "127.0.0.0/8"
		if b.cfg.Family == IPv6 {
			loopback = "::1/128"
		}
		return []string{fmt.Sprintf("! -d %s -m addrtype --dst-type LOCAL -j %s", loopback, ChainNodePorts)}
	}
	var out []string
	for _, a := range b.cfg.NodePortAddresses {
		if b.cfg.Family.Contains(a) {
			out = append(out, fmt.Sprintf("-d %s -j %s", b.host(a), ChainNodePorts))
		}
	}
	return out
}

// nodePortDispatch jumps to each non-empty NodePort bucket, once per protocol it holds.
func (b *Builder) nodePortDispatch(nat map[string][]string) []string {
	var buckets []int
	for c := range nat {
		if n, ok := strings.CutPrefix(c, nodePortPrefix); ok {
			i, _ := strconv.Atoi(n)
			buckets = append(buckets, i)
		}
	}
	slices.Sort(buckets)
	var out []string
	for _, i := range buckets {
		c := nodePortChain(i)
		lo, hi := i<<nodePortBucketLog, (i+1)<<nodePortBucketLog-1
		for _, proto := range []string{"tcp", "udp", "sctp"} {
			if slices.ContainsFunc(nat[c], func(r string) bool { return strings.HasPrefix(r, "-p "+proto+" ") }) {
				out = append(out, fmt.Sprintf("-p %s -m %s --dport %d:%d -j %s", proto, proto, lo, hi, c))
			}
		}
	}
	return out
}

func (b *Builder) postrouting(hairpin map[netip.Addr]bool) []string {
	ips := make([]netip.Addr, 0, len(hairpin))
	for ip := range hairpin {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	var out []string
	for _, ip := range ips {
		// A pod sent to itself through a service: without masquerading it would answer itself
		// directly and the client side of the connection would never see the reply.
		out = append(out, fmt.Sprintf("-s %s -d %s -j MASQUERADE", b.host(ip), b.host(ip)))
	}
	return append(out,
		fmt.Sprintf("-m mark ! --mark %s -j RETURN", b.markMatch()),
		fmt.Sprintf("-j MARK --set-xmark %#x/0x0", b.cfg.MasqueradeMark), // flips the bit off
		"-j MASQUERADE --random-fully",
	)
}

func (b *Builder) markOffCluster() []string {
	var out []string
	for _, p := range b.cfg.ClusterCIDRs {
		out = append(out, fmt.Sprintf("-s %s -j RETURN", p.Masked()))
	}
	return append(out, b.mark())
}

func (b *Builder) markMatch() string {
	return fmt.Sprintf("%#x/%#x", b.cfg.MasqueradeMark, b.cfg.MasqueradeMark)
}

func (b *Builder) mark() string {
	return fmt.Sprintf("-j MARK --set-xmark %#x/%#x", b.cfg.MasqueradeMark, b.cfg.MasqueradeMark)
}

// reject answers with ICMP port unreachable: a fast "connection refused".
func (b *Builder) reject() string {
	if b.cfg.Family == IPv6 {
		return "-j REJECT --reject-with icmp6-port-unreachable"
	}
	return "-j REJECT --reject-with icmp-port-unreachable"
}

// recentMask is the `-m recent --mask` that keys affinity on the whole source address.
func (b *Builder) recentMask() string {
	if b.cfg.Family == IPv6 {
		return "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	}
	return "255.255.255.255"
}

// host is an address as a single-host prefix.
func (b *Builder) host(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

// render turns one service port into its rules. See doc.go for the layout. Its steps: the
// internal traffic (the ClusterIP), the external destinations (externalIPs, LoadBalancer IPs,
// the NodePort) and their rules, and the health-check node port's accept.
func (b *Builder) render(sp *ServicePort) *portRules {
	r := &portRender{sp: sp, key: sp.Key(), cluster: sp.ClusterEndpoints(), local: sp.LocalEndpoints(),
		proto: fmt.Sprintf("-p %s -m %s --dport %%d", sp.Protocol, sp.Protocol), out: &portRules{}}
	for _, e := range r.local {
		r.out.hairpin = append(r.out.hairpin, e.IP)
	}
	b.renderInternal(r)
	externals := b.externalDestinations(r)
	if len(externals) == 0 {
		return r.out
	}
	b.renderExternal(r, externals)
	if sp.ExternalLocal && sp.HealthCheckNodePort != 0 {
		r.out.accepts = append(r.out.accepts, fmt.Sprintf("-p tcp -m addrtype --dst-type LOCAL -m tcp --dport %d -j ACCEPT", sp.HealthCheckNodePort))
	}
	return r.out
}

// portRender is one service port being rendered: its input, the endpoint sets derived from it,
// and the rules rendered so far.
type portRender struct {
	sp             *ServicePort
	key            string
	cluster, local []Endpoint
	// proto matches the protocol and, through %d, a destination port.
	proto string
	out   *portRules
}

// renderInternal renders the ClusterIP: rejected without endpoints, dropped when
// internalTrafficPolicy: Local finds none here, else balanced (marked for masquerading when off
// the cluster CIDRs or with --masquerade-all).
func (b *Builder) renderInternal(r *portRender) {
	sp := r.sp
	if !b.cfg.Family.Contains(sp.ClusterIP) {
		return
	}
	dst := fmt.Sprintf("-d %s %s", b.host(sp.ClusterIP), fmt.Sprintf(r.proto, sp.Port))
	internal := r.cluster
	if sp.InternalLocal {
		internal = r.local
	}
	switch {
	case len(r.cluster) == 0:
		r.out.filter = append(r.out.filter, dst+" "+b.reject())
	case len(internal) == 0:
		r.out.filter = append(r.out.filter, dst+" -j DROP")
		r.out.noLocalInternal = true
	default:
		var rules []string
		if b.cfg.MasqueradeAll {
			rules = append(rules, dst+" "+b.mark())
		} else if len(b.cfg.ClusterCIDRs) > 0 && !sp.InternalLocal {
			rules = append(rules, dst+" -j "+ChainMarkOffCluster)
		}
		rules = append(rules, b.balance(dst, r.key, internal, sp)...)
		r.out.nat = append(r.out.nat, fragment{bucketChain(bucketOf(sp.ClusterIP)), rules})
	}
}

// external is one destination of external traffic: the nat chain and match that catch it, the
// filter match (after DNAT), and the LoadBalancer IP it is (zero for externalIPs and NodePorts).
type external struct {
	chain, match, filterMatch string
	lbIP                      netip.Addr
}

// externalDestinations lists the port's externalIPs, LoadBalancer IPs and NodePort.
func (b *Builder) externalDestinations(r *portRender) []external {
	sp := r.sp
	var out []external
	for _, ip := range sp.ExternalIPs {
		if b.cfg.Family.Contains(ip) {
			m := fmt.Sprintf("-d %s %s", b.host(ip), fmt.Sprintf(r.proto, sp.Port))
			out = append(out, external{bucketChain(bucketOf(ip)), m, m, netip.Addr{}})
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if b.cfg.Family.Contains(ip) {
			m := fmt.Sprintf("-d %s %s", b.host(ip), fmt.Sprintf(r.proto, sp.Port))
			out = append(out, external{bucketChain(bucketOf(ip)), m, m, ip})
		}
	}
	if sp.NodePort != 0 {
		m := fmt.Sprintf(r.proto, sp.NodePort)
		local := fmt.Sprintf("-p %s -m addrtype --dst-type LOCAL -m %s --dport %d", sp.Protocol, sp.Protocol, sp.NodePort)
		out = append(out, external{nodePortChain(nodePortBucket(sp.NodePort)), m, local, netip.Addr{}})
	}
	return out
}

// renderExternal renders the external destinations: rejected without endpoints; with
// externalTrafficPolicy: Local sent to the port's own chains (dropped when no endpoint is
// local); otherwise marked and balanced. LoadBalancer IPs get their source ranges.
func (b *Builder) renderExternal(r *portRender, externals []external) {
	sp := r.sp
	if sp.ExternalLocal && len(r.cluster) > 0 {
		r.out.chains = b.localChains(r.key, sp, r.cluster, r.local)
		r.out.noLocalExternal = len(r.local) == 0
	}
	for _, x := range externals {
		switch {
		case len(r.cluster) == 0:
			r.out.filter = append(r.out.filter, x.filterMatch+" "+b.reject())
			continue
		case sp.ExternalLocal:
			r.out.nat = append(r.out.nat, fragment{x.chain, []string{x.match + " -j " + externalChain(r.key)}})
			if len(r.local) == 0 {
				// Not short-circuited and nowhere to go: the packet leaves nat untouched and is
				// dropped here, so the load balancer's health check fails over.
				r.out.filter = append(r.out.filter, x.filterMatch+" -j DROP")
			}
		default:
			rules := append([]string{x.match + " " + b.mark()}, b.balance(x.match, r.key, r.cluster, sp)...)
			r.out.nat = append(r.out.nat, fragment{x.chain, rules})
		}
		if x.lbIP.IsValid() && (len(sp.SourceRanges) > 0 || sp.SourceRangesInvalid) {
			r.out.sourceRanges = append(r.out.sourceRanges, b.sourceRanges(sp, x.lbIP)...)
		}
	}
}

// localChains are the two chains of an externalTrafficPolicy: Local port: PTC-X-<hash> decides
// between cluster-wide endpoints (traffic from pods and from the node itself) and local ones
// (everything else, source address kept); PTC-C-<hash> balances over cluster-wide endpoints.
func (b *Builder) localChains(key string, sp *ServicePort, cluster, local []Endpoint) map[string][]string {
	x, c := externalChain(key), clusterChain(key)
	var xr []string
	for _, cidr := range b.cfg.ClusterCIDRs {
		xr = append(xr, fmt.Sprintf("-s %s -j %s", cidr.Masked(), c))
	}
	xr = append(xr,
		"-m addrtype --src-type LOCAL "+b.mark(),
		"-m addrtype --src-type LOCAL -j "+c,
	)
	protoOnly := "-p " + sp.Protocol
	xr = append(xr, b.balance(protoOnly, key, local, sp)...)
	return map[string][]string{x: xr, c: b.balance(protoOnly, key, cluster, sp)}
}

// balance spreads new connections matching match over eps: with affinity, a client seen within
// the timeout goes back to its endpoint; otherwise rule i of n takes the connection with
// probability 1/(n-i) and the last one takes the rest. Every rule DNATs directly.
func (b *Builder) balance(match, key string, eps []Endpoint, sp *ServicePort) []string {
	if len(eps) == 0 {
		return nil
	}
	var out []string
	if sp.AffinitySeconds > 0 {
		for _, e := range eps {
			out = append(out, fmt.Sprintf("%s -m recent --rcheck --seconds %d --reap --name %s --mask %s --rsource -j DNAT --to-destination %s",
				match, sp.AffinitySeconds, affinityList(key, e), b.recentMask(), e))
		}
	}
	for i, e := range eps {
		r := match
		if n := len(eps) - i; n > 1 {
			r += " -m statistic --mode random --probability " + probability(n)
		}
		if sp.AffinitySeconds > 0 {
			r += fmt.Sprintf(" -m recent --set --name %s --mask %s --rsource", affinityList(key, e), b.recentMask())
		}
		out = append(out, r+" -j DNAT --to-destination "+e.String())
	}
	return out
}

// sourceRanges admit new connections to an LB IP from the allowed ranges and drop the rest (all
// of them when the ranges are invalid). They run in filter after DNAT, so they match the
// original destination through conntrack.
func (b *Builder) sourceRanges(sp *ServicePort, lbIP netip.Addr) []string {
	orig := fmt.Sprintf("-p %s -m conntrack --ctorigdst %s --ctorigdstport %d", sp.Protocol, lbIP, sp.Port)
	var out []string
	for _, r := range sp.SourceRanges {
		if !sp.SourceRangesInvalid && b.cfg.Family.Contains(r.Addr()) {
			out = append(out, fmt.Sprintf("-s %s %s -j RETURN", r.Masked(), orig))
		}
	}
	return append(out, orig+" -j DROP")
}

// probability is 1/n as xt_statistic stores it (a fraction of 2^31) and iptables-save prints it,
// so that rendered rules compare equal to what the kernel reports (see Canonical in restore.go).
func probability(n int) string {
	stored := math.Round(float64(1<<31) / float64(n))
	return strconv.FormatFloat(stored/float64(1<<31), 'f', 11, 64)
}
