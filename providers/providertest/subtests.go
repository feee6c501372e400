package providertest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers"
)

// ingressPerFamily: Ensure reports an ingress for every requested IP family (or a hostname).
func (s *suite) ingressPerFamily(t *testing.T) {
	sets := s.opts.FamilySets
	if sets == nil {
		// A throwaway provider tells us which families to try.
		sets = defaultFamilySets(s.newProvider(t).Capabilities())
	}
	for _, set := range sets {
		t.Run(familiesName(set), func(t *testing.T) {
			e := s.start(t)
			lb := e.newLB("ingress-" + strings.ToLower(familiesName(set)))
			lb.IPFamilies = slices.Clone(set)
			e.ensure(lb) // ensure checks the status has an ingress per family
		})
	}
}

// idempotent: a second Ensure with the same model returns the same status and changes nothing.
func (s *suite) idempotent(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("idempotent")
	first := e.ensure(lb)
	second := e.ensure(cloneLB(lb))
	e.expectStatus("second Ensure", second, first)
	e.expectStatus("Get after two Ensures", e.get(lb.Ref), first)
}

// getAfterEnsure: Get reports what Ensure reported.
func (s *suite) getAfterEnsure(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("get")
	st := e.ensure(lb)
	e.expectStatus("Get", e.get(lb.Ref), st)
}

// portUpdate: adding a port, changing a node port and removing a port converge in place.
func (s *suite) portUpdate(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("ports")
	initial := e.ensure(lb)

	steps := []struct {
		name  string
		ports []providers.Port
	}{
		{"add port 443", []providers.Port{
			{Name: "http", Protocol: e.protocol, Port: 80, NodePort: 30080},
			{Name: "https", Protocol: e.protocol, Port: 443, NodePort: 30443},
		}},
		{"change node port of 80", []providers.Port{
			{Name: "http", Protocol: e.protocol, Port: 80, NodePort: 30081},
			{Name: "https", Protocol: e.protocol, Port: 443, NodePort: 30443},
		}},
		{"remove port 443", []providers.Port{
			{Name: "http", Protocol: e.protocol, Port: 80, NodePort: 30081},
		}},
	}
	last := initial
	for _, step := range steps {
		next := cloneLB(lb)
		next.Ports = step.ports
		last = e.ensure(next)
		e.expectSameAddresses(step.name, last, initial)
	}
	e.expectStatus("Get after port updates", e.get(lb.Ref), last)
}

// nodeSetChange: shrinking, emptying and restoring the node set keeps the address.
func (s *suite) nodeSetChange(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("nodes")
	initial := e.ensure(lb)

	steps := []struct {
		name  string
		nodes []providers.Node
	}{
		{"first half of the nodes", e.nodes[:len(e.nodes)/2]},
		{"no nodes", nil},
		{"all nodes again", e.nodes},
	}
	last := initial
	for _, step := range steps {
		next := cloneLB(lb)
		next.Nodes = cloneNodes(step.nodes)
		last = e.ensure(next)
		e.expectSameAddresses(step.name, last, initial)
	}
	e.expectStatus("Get after node changes", e.get(lb.Ref), last)
}

// deleteThenGet: after Delete, Get returns ErrNotFound.
func (s *suite) deleteThenGet(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("delete")
	e.ensure(lb)
	e.del(lb.Ref)
	e.expectNotFound(lb.Ref)
}

// deleteTwice: Delete is idempotent.
func (s *suite) deleteTwice(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("delete-twice")
	e.ensure(lb)
	e.del(lb.Ref)
	e.del(lb.Ref)
	e.expectNotFound(lb.Ref)
}

// deleteNeverCreated: deleting a Ref that never had a load balancer succeeds.
func (s *suite) deleteNeverCreated(t *testing.T) {
	e := s.start(t)
	ref := e.newLB("never-created").Ref
	e.del(ref)
	e.expectNotFound(ref)
}

// distinctAddresses: two Services never share an address.
func (s *suite) distinctAddresses(t *testing.T) {
	e := s.start(t)
	a, b := e.newLB("distinct-a"), e.newLB("distinct-b")
	stA, stB := e.ensure(a), e.ensure(b)
	for _, addr := range addresses(stA) {
		if slices.Contains(addresses(stB), addr) {
			t.Errorf("%s and %s share address %s", a.Ref, b.Ref, addr)
		}
	}
}

// sessionAffinity: ClientIP affinity is served, or rejected before anything is created.
func (s *suite) sessionAffinity(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("affinity")
	lb.SessionAffinity = providers.SessionAffinity{ClientIP: true, Timeout: 3 * time.Hour}
	if e.caps.SessionAffinity {
		e.ensure(lb)
		return
	}
	e.expectInvalid(lb, "spec.sessionAffinity")
	e.expectNotFound(lb.Ref)
}

// nodePortZero: a provider that needs node ports rejects a port without one, both on create
// (creating nothing) and on update (keeping what exists); any other provider serves it.
func (s *suite) nodePortZero(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("no-node-port")
	lb.Ports[0].NodePort = 0
	if !e.caps.NeedsNodePorts {
		e.ensure(lb)
		return
	}
	e.expectInvalid(lb, "")
	e.expectNotFound(lb.Ref)

	existing := e.newLB("no-node-port-update")
	st := e.ensure(existing)
	update := cloneLB(existing)
	update.Ports = append(update.Ports, providers.Port{Name: "extra", Protocol: e.protocol, Port: 8080})
	e.expectInvalid(update, "")
	e.expectStatus("Get after rejected update", e.get(existing.Ref), st)
}

// mixedProtocols: TCP and UDP on one load balancer are served, or rejected before anything is
// created.
func (s *suite) mixedProtocols(t *testing.T) {
	e := s.start(t)
	for _, p := range []providers.Protocol{providers.TCP, providers.UDP} {
		if e.caps.Protocols != nil && !slices.Contains(e.caps.Protocols, p) {
			t.Skipf("provider does not serve %s at all", p)
		}
	}
	lb := e.newLB("mixed")
	lb.Ports = []providers.Port{
		{Name: "dns-tcp", Protocol: providers.TCP, Port: 53, NodePort: 30053},
		{Name: "dns-udp", Protocol: providers.UDP, Port: 53, NodePort: 30053},
	}
	if e.caps.MixedProtocols {
		e.ensure(lb)
		return
	}
	e.expectInvalid(lb, "")
	e.expectNotFound(lb.Ref)
}

// unsupportedProtocol: a protocol outside Capabilities().Protocols is rejected.
func (s *suite) unsupportedProtocol(t *testing.T) {
	e := s.start(t)
	if e.caps.Protocols == nil {
		t.Skip("provider serves every protocol")
	}
	for _, p := range []providers.Protocol{providers.TCP, providers.UDP, providers.SCTP} {
		if slices.Contains(e.caps.Protocols, p) {
			continue
		}
		lb := e.newLB("protocol-" + strings.ToLower(string(p)))
		lb.Ports[0].Protocol = p
		e.expectInvalid(lb, "")
		e.expectNotFound(lb.Ref)
	}
}

// requestedIP: a requested address is honoured, or rejected when the provider cannot honour
// one.
func (s *suite) requestedIP(t *testing.T) {
	e := s.start(t)
	lb := e.newLB("requested-ip")
	if !e.caps.RequestedIPs {
		want := netip.MustParseAddr("198.18.128.200")
		if e.families[0] == providers.IPv6 {
			want = netip.MustParseAddr("2001:db8::200")
		}
		lb.RequestedIPs = []netip.Addr{want}
		e.expectInvalid(lb, "")
		e.expectNotFound(lb.Ref)
		return
	}
	want := e.opts.RequestableIP
	if !want.IsValid() {
		t.Skip("Options.RequestableIP is not set")
	}
	lb.IPFamilies = []providers.IPFamily{family(want)}
	lb.RequestedIPs = []netip.Addr{want}
	st := e.ensure(lb)
	if !e.opts.Hostnames && !slices.ContainsFunc(st.Ingress, func(in providers.Ingress) bool { return in.IP == want }) {
		t.Errorf("status %+v does not report the requested address %s", st, want)
	}
	// The address stays taken while lb holds it.
	other := e.newLB("requested-ip-taken")
	other.IPFamilies, other.RequestedIPs = slices.Clone(lb.IPFamilies), slices.Clone(lb.RequestedIPs)
	if _, err := e.tryEnsure(other); err == nil {
		t.Errorf("Ensure(%s) requesting %s, held by %s, succeeded", other.Ref, want, lb.Ref)
	}
	e.expectNotFound(other.Ref)
}

// concurrentEnsure: Ensure, Get and Delete of many Refs at once are safe and give distinct
// addresses.
func (s *suite) concurrentEnsure(t *testing.T) {
	e := s.start(t)
	n := e.opts.Concurrency
	lbs := make([]*providers.LoadBalancer, n)
	for i := range lbs {
		lbs[i] = e.newLB(fmt.Sprintf("concurrent-%d", i))
		e.track(lbs[i].Ref) // t.Cleanup is registered here, on the test goroutine
	}

	statuses := make([]providers.Status, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, lb := range lbs {
		wg.Go(func() {
			st, err := e.tryEnsure(lb)
			if err == nil {
				var got providers.Status
				got, err = e.p.Get(e.ctx, lb.Ref)
				if err == nil && !statusEqual(got, st) {
					err = fmt.Errorf("get = %+v, ensure returned %+v", got, st)
				}
			}
			statuses[i], errs[i] = st, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Ensure: %v", err)
	}

	owner := map[string]providers.Ref{}
	for i, st := range statuses {
		for _, addr := range addresses(st) {
			if prev, dup := owner[addr]; dup {
				t.Errorf("%s and %s share address %s", prev, lbs[i].Ref, addr)
			}
			owner[addr] = lbs[i].Ref
		}
	}

	for i, lb := range lbs {
		wg.Go(func() { errs[i] = e.p.Delete(e.ctx, lb.Ref) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Delete: %v", err)
	}
	for _, lb := range lbs {
		e.expectNotFound(lb.Ref)
	}
}

// defaultFamilySets is every family the provider serves alone, then all of them together.
func defaultFamilySets(caps providers.Capabilities) [][]providers.IPFamily {
	fams := caps.IPFamilies
	if fams == nil {
		fams = []providers.IPFamily{providers.IPv4, providers.IPv6}
	}
	var sets [][]providers.IPFamily
	for _, f := range fams {
		sets = append(sets, []providers.IPFamily{f})
	}
	if len(fams) > 1 {
		sets = append(sets, slices.Clone(fams))
	}
	return sets
}

func familiesName(set []providers.IPFamily) string {
	parts := make([]string, len(set))
	for i, f := range set {
		parts[i] = string(f)
	}
	return strings.Join(parts, "-")
}
