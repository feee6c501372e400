package baremetal

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// Field paths named by the allocator's InvalidErrors.
const (
	fieldRequested = "spec.loadBalancerIP"
	fieldPool      = "metadata.annotations[" + annotations.AddressPool + "]"
	fieldSharing   = "metadata.annotations[" + annotations.AllowSharedIP + "]"
	fieldFamilies  = "spec.ipFamilies"
)

// PendingError means the Service is fine but cannot be served now: its pools are exhausted,
// there is no pool for it, or its pool is invalid. The Service stays pending and nothing else
// changes; the provider retries it.
type PendingError struct{ Reason string }

func (e *PendingError) Error() string { return e.Reason }

func pending(format string, args ...any) error {
	return &PendingError{Reason: fmt.Sprintf(format, args...)}
}

// PortKey is one (protocol, port) a Service serves on its address.
type PortKey struct {
	Protocol providers.Protocol
	Port     int32
}

// Sharing is what decides whether two Services may share an address: the same non-empty Key,
// the same Backend, and disjoint Ports.
type Sharing struct {
	// Key is the portico-lb.io/allow-shared-ip value ("" shares with no one).
	Key string
	// Backend is "" for externalTrafficPolicy Cluster and the canonical selector for Local:
	// all ports of an address are announced from one node, so Local Services sharing it must
	// have their endpoints on the same nodes.
	Backend string
	Ports   []PortKey
}

func (s Sharing) compatible(o Sharing) bool {
	if s.Key == "" || s.Key != o.Key || s.Backend != o.Backend {
		return false
	}
	for _, p := range s.Ports {
		if slices.Contains(o.Ports, p) {
			return false
		}
	}
	return true
}

// Request is everything the allocator needs to know about one Service.
type Request struct {
	Ref      providers.Ref
	Families []providers.IPFamily
	Policy   providers.IPFamilyPolicy
	// Requested addresses (spec.loadBalancerIP or the loadBalancerIPs annotations).
	Requested []netip.Addr
	// Current addresses from the Service's status.
	Current []netip.Addr
	// Pool named by portico-lb.io/address-pool ("" for any).
	Pool     string
	Internal bool
	// Labels of the Service and of its namespace, for the pools' selectors.
	Labels, NamespaceLabels map[string]string
	Sharing                 Sharing
	// Reserved are the addresses Services this provider does not serve hold or request
	// (ForeignClaims): never handed to req, neither chosen nor granted on request. An address
	// req already holds in the allocator's record stays its own.
	Reserved Claims
}

// RequestFor builds the allocator's Request for a load balancer. nsLabels are the labels of its
// namespace (nil when no pool selects namespaces by label).
func RequestFor(lb *providers.LoadBalancer, nsLabels map[string]string) Request {
	opts, _ := optionsOf(lb) // Ensure rejects options that are not ServiceOptions
	r := Request{
		Ref:             lb.Ref,
		Families:        slices.Compact(slices.Clone(lb.IPFamilies)),
		Policy:          lb.IPFamilyPolicy,
		Requested:       unmapAll(lb.RequestedIPs),
		Current:         unmapAll(lb.CurrentIPs),
		Pool:            opts.AddressPool,
		Internal:        lb.Internal,
		Labels:          lb.Labels,
		NamespaceLabels: nsLabels,
		Sharing: Sharing{
			Key:     opts.AllowSharedIP,
			Backend: backendKey(lb.LocalTrafficOnly, lb.Selector),
		},
	}
	for _, p := range lb.Ports {
		r.Sharing.Ports = append(r.Sharing.Ports, PortKey{Protocol: p.Protocol, Port: p.Port})
	}
	if len(r.Families) == 0 {
		r.Families = []providers.IPFamily{providers.IPv4}
	}
	return r
}

// backendKey is "" for externalTrafficPolicy Cluster and the sorted selector for Local.
func backendKey(local bool, selector map[string]string) string {
	if !local {
		return ""
	}
	return "local:" + labels.SelectorFromSet(selector).String()
}

func unmapAll(in []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range in {
		out = append(out, a.Unmap())
	}
	return out
}

// holding is one Service's allocation.
type holding struct {
	ips     []netip.Addr
	sharing Sharing
}

// Allocator records which Service holds which addresses and decides new allocations. It is
// pure (no I/O) and not safe for concurrent use: the Provider serialises every call.
type Allocator struct {
	byRef map[providers.Ref]*holding
	byIP  map[netip.Addr]map[providers.Ref]bool
}

// NewAllocator returns an empty Allocator.
func NewAllocator() *Allocator {
	return &Allocator{byRef: map[providers.Ref]*holding{}, byIP: map[netip.Addr]map[providers.Ref]bool{}}
}

// Holding returns the addresses ref holds, in family order of its last allocation.
func (a *Allocator) Holding(ref providers.Ref) ([]netip.Addr, bool) {
	h, ok := a.byRef[ref]
	if !ok {
		return nil, false
	}
	return slices.Clone(h.ips), true
}

// Held returns every held address (each once), sorted.
func (a *Allocator) Held() []netip.Addr {
	out := slices.Collect(maps.Keys(a.byIP))
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Restore records what an owned Service's status says it holds, at startup, including
// addresses no pool contains any more (a pool edit never takes an address away). An address
// held by an earlier restored Service it may not share with is dropped (the Service's next
// Ensure decides again). Callers restore the oldest Services first.
func (a *Allocator) Restore(ref providers.Ref, ips []netip.Addr, sharing Sharing) {
	var keep []netip.Addr
	for _, ip := range unmapAll(ips) {
		if slices.Contains(keep, ip) || !a.shareable(ip, ref, sharing) {
			continue
		}
		keep = append(keep, ip)
	}
	if len(keep) > 0 {
		a.set(ref, keep, sharing)
	}
}

// Release frees everything ref holds.
func (a *Allocator) Release(ref providers.Ref) {
	h, ok := a.byRef[ref]
	if !ok {
		return
	}
	for _, ip := range h.ips {
		delete(a.byIP[ip], ref)
		if len(a.byIP[ip]) == 0 {
			delete(a.byIP, ip)
		}
	}
	delete(a.byRef, ref)
}

func (a *Allocator) set(ref providers.Ref, ips []netip.Addr, sharing Sharing) {
	a.Release(ref)
	a.byRef[ref] = &holding{ips: ips, sharing: sharing}
	for _, ip := range ips {
		if a.byIP[ip] == nil {
			a.byIP[ip] = map[providers.Ref]bool{}
		}
		a.byIP[ip][ref] = true
	}
}

// shareable reports whether ref (with sharing) may hold ip given the other holders.
func (a *Allocator) shareable(ip netip.Addr, ref providers.Ref, sharing Sharing) bool {
	for other := range a.byIP[ip] {
		if other == ref {
			continue
		}
		if !sharing.compatible(a.byRef[other].sharing) {
			return false
		}
	}
	return true
}

// holders returns the other Services holding ip, sorted, for messages.
func (a *Allocator) holders(ip netip.Addr, ref providers.Ref) []string {
	var out []string
	for other := range a.byIP[ip] {
		if other != ref {
			out = append(out, other.String())
		}
	}
	sort.Strings(out)
	return out
}

// Assign decides the addresses of req.Ref, one per family in req.Families order (fewer with
// PreferDualStack when a family cannot be served), records them and releases any address the
// Service held and no longer gets. On error nothing changes: an *providers.InvalidError when
// the Service must change, a *PendingError when it must wait.
func (a *Allocator) Assign(pools []*addresspool.Pool, req Request) ([]netip.Addr, error) {
	// What the Service holds: the allocator's record, or after a class change to this
	// provider the addresses its status reports that lie in a pool.
	var held []netip.Addr
	if h, ok := a.byRef[req.Ref]; ok {
		held = h.ips
	} else {
		for _, ip := range req.Current {
			if _, foreign := req.Reserved[ip]; !foreign && addresspool.Containing(pools, ip) != nil {
				held = append(held, ip)
			}
		}
	}
	if req.Pool != "" {
		p := findPool(pools, req.Pool)
		if p != nil && p.Internal != req.Internal {
			return nil, providers.Invalid(fieldPool, "pool %q is %s but the Service is %s (%s)", p.Name, internalWord(p.Internal), internalWord(req.Internal), annotations.Internal)
		}
		if p != nil && len(p.Problems) == 0 && req.Policy != providers.PreferDualStack {
			for _, fam := range req.Families {
				if !slices.Contains(p.Families(), corev1.IPFamily(fam)) {
					return nil, providers.Invalid(fieldPool, "pool %q has no %s addresses, which %s ask for", p.Name, fam, fieldFamilies)
				}
			}
		}
	}
	if err := a.checkRequested(req); err != nil {
		return nil, err
	}

	var out []netip.Addr
	var firstPending error
	for _, fam := range req.Families {
		ip, err := a.assignFamily(pools, req, fam, held, out)
		if err == nil {
			out = append(out, ip)
			continue
		}
		// PreferDualStack gets the families it can, at least one.
		if _, isPending := err.(*PendingError); isPending && req.Policy == providers.PreferDualStack {
			if firstPending == nil {
				firstPending = err
			}
			continue
		}
		return nil, err
	}
	if len(out) == 0 {
		return nil, firstPending
	}
	a.set(req.Ref, out, req.Sharing)
	return slices.Clone(out), nil
}

func (a *Allocator) checkRequested(req Request) error {
	seen := map[providers.IPFamily]bool{}
	for _, ip := range req.Requested {
		f := familyOf(ip)
		if seen[f] {
			return providers.Invalid(fieldRequested, "requests two %s addresses; request at most one per family", f)
		}
		seen[f] = true
		if !slices.Contains(req.Families, f) {
			return providers.Invalid(fieldRequested, "requests %s, an %s address, but %s are %v", ip, f, fieldFamilies, req.Families)
		}
	}
	return nil
}

// assignFamily decides the address of family fam. taken holds addresses already chosen for
// other families.
func (a *Allocator) assignFamily(pools []*addresspool.Pool, req Request, fam providers.IPFamily, held, taken []netip.Addr) (netip.Addr, error) {
	for _, ip := range req.Requested {
		if familyOf(ip) == fam {
			return a.assignRequested(pools, req, ip, held)
		}
	}
	for _, ip := range held {
		if familyOf(ip) == fam && a.keepable(pools, req, ip) {
			return ip, nil
		}
	}
	return a.allocate(pools, req, fam)
}

// assignRequested checks that ip may be given to req.
func (a *Allocator) assignRequested(pools []*addresspool.Pool, req Request, ip netip.Addr, held []netip.Addr) (netip.Addr, error) {
	p := addresspool.Containing(pools, ip)
	if p == nil {
		return netip.Addr{}, providers.Invalid(fieldRequested, "%s is in no address pool", ip)
	}
	if !a.shareable(ip, req.Ref, req.Sharing) {
		return netip.Addr{}, providers.Invalid(fieldRequested, "%s is held by %s and the sharing rules do not allow sharing it (same %s key, the same selector with externalTrafficPolicy Local, no common port)",
			ip, strings.Join(a.holders(ip, req.Ref), ", "), annotations.AllowSharedIP)
	}
	if slices.Contains(held, ip) {
		return ip, nil // already held: kept whatever became of its pool
	}
	if who, foreign := req.Reserved[ip]; foreign {
		return netip.Addr{}, providers.Invalid(fieldRequested, "%s is held or requested by %s, a Service this provider does not serve; request another address", ip, who)
	}
	if !p.Usable() {
		return netip.Addr{}, pending("pool %q that holds %s is not usable: %s", p.Name, ip, poolTrouble(p))
	}
	if why := eligible(p, req, false); why != "" {
		return netip.Addr{}, providers.Invalid(fieldRequested, "%s is in pool %q, which %s", ip, p.Name, why)
	}
	if ok, reserved := p.UsableAddr(ip); !ok && reserved {
		return netip.Addr{}, providers.Invalid(fieldRequested, "%s is the network or broadcast address of its CIDR in pool %q (the pool sets allowNetworkAndBroadcast to hand those out)", ip, p.Name)
	}
	return ip, nil
}

// keepable reports whether req may keep the address it holds: only a choice the Service itself
// made (another pool, internal or not, sharing) takes it away. Pool edits, selectors and
// auto-assign never do.
func (a *Allocator) keepable(pools []*addresspool.Pool, req Request, ip netip.Addr) bool {
	p := addresspool.Containing(pools, ip)
	if req.Pool != "" && (p == nil || p.Name != req.Pool) {
		return false
	}
	if p != nil && p.Internal != req.Internal {
		return false
	}
	return a.shareable(ip, req.Ref, req.Sharing)
}

// allocate picks a new address of family fam: an address it may share first, then the first
// free one, from the eligible pools in priority order. Addresses in req.Reserved are neither.
func (a *Allocator) allocate(pools []*addresspool.Pool, req Request, fam providers.IPFamily) (netip.Addr, error) {
	cands, err := candidates(pools, req, fam)
	if err != nil {
		return netip.Addr{}, err
	}
	if req.Sharing.Key != "" {
		for _, p := range cands {
			for _, ip := range a.Held() {
				if familyOf(ip) != fam || len(a.byIP[ip]) == 0 {
					continue
				}
				if _, foreign := req.Reserved[ip]; foreign {
					continue
				}
				if ok, _ := p.UsableAddr(ip); ok && !a.byIP[ip][req.Ref] && a.shareable(ip, req.Ref, req.Sharing) {
					return ip, nil
				}
			}
		}
	}
	for _, p := range cands {
		for _, r := range p.Ranges {
			if providers.IPFamily(r.Family()) != fam {
				continue
			}
			for ip := r.UsableFirst; ip.IsValid() && ip.Compare(r.UsableLast) <= 0; ip = ip.Next() {
				if _, foreign := req.Reserved[ip]; !foreign && len(a.byIP[ip]) == 0 {
					return ip, nil
				}
			}
		}
	}
	names := make([]string, len(cands))
	for i, p := range cands {
		names[i] = p.Name
	}
	return netip.Addr{}, pending("no free %s address in pool(s) %s", fam, strings.Join(names, ", "))
}

// candidates returns the usable pools that may serve req with family fam, best first.
func candidates(pools []*addresspool.Pool, req Request, fam providers.IPFamily) ([]*addresspool.Pool, error) {
	if req.Pool != "" {
		p := findPool(pools, req.Pool)
		switch {
		case p == nil:
			return nil, pending("address pool %q does not exist", req.Pool)
		case !p.Usable():
			return nil, pending("address pool %q is not usable: %s", p.Name, poolTrouble(p))
		case !slices.Contains(p.Families(), corev1.IPFamily(fam)):
			if req.Policy == providers.PreferDualStack {
				return nil, pending("address pool %q has no %s addresses", p.Name, fam)
			}
			return nil, providers.Invalid(fieldPool, "pool %q has no %s addresses, which %s ask for", p.Name, fam, fieldFamilies)
		}
		if why := eligible(p, req, false); why != "" {
			return nil, providers.Invalid(fieldPool, "pool %q %s", p.Name, why)
		}
		return []*addresspool.Pool{p}, nil
	}
	var out []*addresspool.Pool
	for _, p := range pools {
		if p.Usable() && slices.Contains(p.Families(), corev1.IPFamily(fam)) && eligible(p, req, true) == "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, pending("no usable %s address pool with autoAssign serves this Service (%s)", fam, describe(req))
	}
	sort.SliceStable(out, func(i, j int) bool { return priorityLess(out[i], out[j]) })
	return out, nil
}

// priorityLess orders pools: lowest non-zero priority first, 0 last, then by name.
func priorityLess(a, b *addresspool.Pool) bool {
	pa, pb := a.Priority, b.Priority
	if (pa == 0) != (pb == 0) {
		return pa != 0
	}
	if pa != pb {
		return pa < pb
	}
	return a.Name < b.Name
}

// eligible returns "" when pool p may serve req, otherwise why not ("is internal ...").
// auto says the Service neither named the pool nor requested one of its addresses.
func eligible(p *addresspool.Pool, req Request, auto bool) string {
	if p.Internal != req.Internal {
		return fmt.Sprintf("is %s but the Service is %s (%s)", internalWord(p.Internal), internalWord(req.Internal), annotations.Internal)
	}
	if auto && !p.AutoAssign {
		return "does not auto-assign"
	}
	if len(p.Namespaces) > 0 || p.NamespaceSelector != nil {
		ok := slices.Contains(p.Namespaces, req.Ref.Namespace) ||
			(p.NamespaceSelector != nil && p.NamespaceSelector.Matches(labels.Set(req.NamespaceLabels)))
		if !ok {
			return fmt.Sprintf("does not serve namespace %q (serviceAllocation)", req.Ref.Namespace)
		}
	}
	if p.ServiceSelector != nil && !p.ServiceSelector.Matches(labels.Set(req.Labels)) {
		return "does not select the Service's labels (serviceAllocation.serviceSelector)"
	}
	return ""
}

func findPool(pools []*addresspool.Pool, name string) *addresspool.Pool {
	for _, p := range pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func poolTrouble(p *addresspool.Pool) string {
	var msgs []string
	for _, e := range p.Problems {
		msgs = append(msgs, e.Error())
	}
	if len(p.Conflicts) > 0 {
		msgs = append(msgs, "overlaps older pool(s) "+strings.Join(p.Conflicts, ", "))
	}
	return strings.Join(msgs, "; ")
}

func internalWord(internal bool) string {
	if internal {
		return "internal"
	}
	return "not internal"
}

// familyOf returns the IP family of a (IPv4-mapped IPv6 addresses count as IPv4).
func familyOf(a netip.Addr) providers.IPFamily {
	if a.Unmap().Is4() {
		return providers.IPv4
	}
	return providers.IPv6
}

func describe(req Request) string {
	return fmt.Sprintf("namespace %s, %s", req.Ref.Namespace, internalWord(req.Internal))
}
