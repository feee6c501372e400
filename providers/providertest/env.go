package providertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers"
)

// env is one subtest's provider, context and defaults.
type env struct {
	t        *testing.T
	opts     Options
	p        providers.Provider
	caps     providers.Capabilities
	ctx      context.Context
	nodes    []providers.Node
	families []providers.IPFamily // requested by default
	protocol providers.Protocol   // of the default port

	mu      sync.Mutex
	tracked map[providers.Ref]bool
}

// start prepares a subtest: a fresh provider and a context bounded by Options.Timeout.
func (s *suite) start(t *testing.T) *env {
	t.Helper()
	if s.opts.Parallel {
		t.Parallel()
	}
	ctx, cancel := context.WithTimeout(t.Context(), s.opts.Timeout)
	t.Cleanup(cancel)
	p := s.newProvider(t)
	caps := p.Capabilities()
	e := &env{
		t:        t,
		opts:     s.opts,
		p:        p,
		caps:     caps,
		ctx:      ctx,
		nodes:    s.opts.Nodes(t),
		families: []providers.IPFamily{providers.IPv4},
		protocol: providers.TCP,
		tracked:  map[providers.Ref]bool{},
	}
	if len(caps.IPFamilies) > 0 {
		e.families = []providers.IPFamily{caps.IPFamilies[0]}
	}
	if caps.Protocols != nil && !slices.Contains(caps.Protocols, providers.TCP) {
		if len(caps.Protocols) == 0 {
			t.Fatal("Capabilities().Protocols is empty: the provider serves no protocol")
		}
		e.protocol = caps.Protocols[0]
	}
	return e
}

// newLB returns a valid load balancer for a new Ref named name: the default family, one port
// (80 -> node port 30080) and every node.
func (e *env) newLB(name string) *providers.LoadBalancer {
	return &providers.LoadBalancer{
		Ref:        providers.Ref{Namespace: e.opts.Namespace, Name: name, UID: newUID(e.t)},
		Class:      e.opts.Class,
		IPFamilies: slices.Clone(e.families),
		Ports:      []providers.Port{{Name: "http", Protocol: e.protocol, Port: 80, NodePort: 30080}},
		Nodes:      cloneNodes(e.nodes),
		Options:    e.opts.Options,
	}
}

// track makes sure ref is deleted when the subtest ends, pass or fail.
func (e *env) track(ref providers.Ref) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tracked[ref] {
		return
	}
	e.tracked[ref] = true
	e.t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), e.opts.Timeout)
		defer cancel()
		if err := e.p.Delete(ctx, ref); err != nil {
			e.t.Errorf("cleanup: deleting %s: %v", ref, err)
		}
	})
}

// ensure calls Ensure until it succeeds or fails with anything but a *providers.RetryError,
// checks the status and runs Options.Check. It fails the test on error.
func (e *env) ensure(lb *providers.LoadBalancer) providers.Status {
	e.t.Helper()
	st, err := e.tryEnsure(lb)
	if err != nil {
		e.t.Fatalf("Ensure(%s): %v", lb.Ref, err)
	}
	if e.opts.Check != nil {
		e.opts.Check(e.t, e.p, lb, st)
	}
	return st
}

// tryEnsure is ensure without the test failure or Check, for use off the test goroutine.
func (e *env) tryEnsure(lb *providers.LoadBalancer) (providers.Status, error) {
	e.track(lb.Ref)
	before := cloneLB(lb)
	for {
		st, err := e.p.Ensure(e.ctx, lb)
		if !reflect.DeepEqual(before, lb) {
			return st, fmt.Errorf("ensure modified its input:\nbefore %+v\nafter  %+v", before, lb)
		}
		var retry *providers.RetryError
		if errors.As(err, &retry) {
			if err := sleep(e.ctx, retry.After); err != nil {
				return st, fmt.Errorf("waiting to retry (%v): %w", retry, err)
			}
			continue
		}
		if err != nil {
			return st, err
		}
		return st, checkStatus(lb, st, e.opts.Hostnames)
	}
}

// get calls Get and fails the test on error.
func (e *env) get(ref providers.Ref) providers.Status {
	e.t.Helper()
	st, err := e.p.Get(e.ctx, ref)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", ref, err)
	}
	return st
}

// del calls Delete and fails the test on error.
func (e *env) del(ref providers.Ref) {
	e.t.Helper()
	if err := e.p.Delete(e.ctx, ref); err != nil {
		e.t.Fatalf("Delete(%s): %v", ref, err)
	}
}

// expectNotFound checks that Get(ref) fails with ErrNotFound.
func (e *env) expectNotFound(ref providers.Ref) {
	e.t.Helper()
	st, err := e.p.Get(e.ctx, ref)
	if !errors.Is(err, providers.ErrNotFound) {
		e.t.Fatalf("Get(%s) = %+v, %v; want an error wrapping providers.ErrNotFound", ref, st, err)
	}
}

// expectInvalid checks that Ensure(lb) fails with an *providers.InvalidError for field (any
// non-empty field when field is "").
func (e *env) expectInvalid(lb *providers.LoadBalancer, field string) {
	e.t.Helper()
	e.track(lb.Ref)
	st, err := e.p.Ensure(e.ctx, lb)
	var invalid *providers.InvalidError
	switch {
	case err == nil:
		e.t.Fatalf("Ensure(%s) = %+v, nil; want an *providers.InvalidError", lb.Ref, st)
	case !errors.As(err, &invalid):
		e.t.Fatalf("Ensure(%s) error = %v (%T); want an *providers.InvalidError", lb.Ref, err, err)
	case field != "" && invalid.Field != field:
		e.t.Errorf("InvalidError.Field = %q, want %q (error: %v)", invalid.Field, field, err)
	case invalid.Field == "":
		e.t.Errorf("InvalidError.Field is empty; it must name the Service field (error: %v)", err)
	}
}

// expectStatus checks that got equals want.
func (e *env) expectStatus(what string, got, want providers.Status) {
	e.t.Helper()
	if !statusEqual(got, want) {
		e.t.Errorf("%s: status = %+v, want %+v", what, got, want)
	}
}

// expectSameAddresses checks that the load balancer kept its addresses.
func (e *env) expectSameAddresses(what string, got, want providers.Status) {
	e.t.Helper()
	if g, w := addresses(got), addresses(want); !slices.Equal(g, w) {
		e.t.Errorf("%s: addresses changed from %v to %v; an update must keep the ingress address", what, w, g)
	}
}

// checkStatus verifies the shape of a status returned for lb.
func checkStatus(lb *providers.LoadBalancer, st providers.Status, hostnames bool) error {
	if len(st.Ingress) == 0 {
		return fmt.Errorf("status for %s has no ingress", lb.Ref)
	}
	var errs []error
	families := map[providers.IPFamily]bool{}
	sawHostname := false
	for i, in := range st.Ingress {
		switch {
		case !in.IP.IsValid() && in.Hostname == "":
			errs = append(errs, fmt.Errorf("ingress[%d] has neither IP nor hostname", i))
		case !in.IP.IsValid() && in.IPMode != "":
			errs = append(errs, fmt.Errorf("ingress[%d] has ipMode %q but no IP; the API allows ipMode only with an IP", i, in.IPMode))
		case in.IP.IsValid() && in.IPMode != "" && in.IPMode != providers.IPModeVIP && in.IPMode != providers.IPModeProxy:
			errs = append(errs, fmt.Errorf("ingress[%d] has unknown ipMode %q", i, in.IPMode))
		}
		if in.Hostname != "" {
			sawHostname = true
		}
		if in.IP.IsValid() {
			f := family(in.IP)
			families[f] = true
			if !hostnames && !slices.Contains(lb.IPFamilies, f) {
				errs = append(errs, fmt.Errorf("ingress[%d] IP %s is %s, which the Service did not request (%v)", i, in.IP, f, lb.IPFamilies))
			}
		}
	}
	if hostnames && !sawHostname {
		errs = append(errs, fmt.Errorf("status %+v has no hostname; the provider is expected to report one", st))
	}
	if !hostnames {
		for _, f := range lb.IPFamilies {
			if !families[f] {
				errs = append(errs, fmt.Errorf("status %+v has no %s ingress IP; want one per requested family %v", st, f, lb.IPFamilies))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("status for %s: %w", lb.Ref, errors.Join(errs...))
	}
	return nil
}

// addresses returns the sorted IPs and hostnames of st.
func addresses(st providers.Status) []string {
	var out []string
	for _, in := range st.Ingress {
		if in.IP.IsValid() {
			out = append(out, in.IP.String())
		}
		if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	slices.Sort(out)
	return out
}

func statusEqual(a, b providers.Status) bool {
	return slices.EqualFunc(a.Ingress, b.Ingress, func(x, y providers.Ingress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && x.IPMode == y.IPMode && slices.Equal(x.Ports, y.Ports)
	})
}

func family(a netip.Addr) providers.IPFamily {
	if a.Unmap().Is4() {
		return providers.IPv4
	}
	return providers.IPv6
}

// cloneLB copies the parts of a suite-built load balancer a provider could modify in place.
func cloneLB(lb *providers.LoadBalancer) *providers.LoadBalancer {
	c := *lb
	c.IPFamilies = slices.Clone(lb.IPFamilies)
	c.RequestedIPs = slices.Clone(lb.RequestedIPs)
	c.Ports = slices.Clone(lb.Ports)
	c.SourceRanges = slices.Clone(lb.SourceRanges)
	c.Nodes = cloneNodes(lb.Nodes)
	return &c
}

func cloneNodes(nodes []providers.Node) []providers.Node {
	if nodes == nil {
		return nil
	}
	out := make([]providers.Node, len(nodes))
	for i, n := range nodes {
		n.Addresses = slices.Clone(n.Addresses)
		n.Labels = maps.Clone(n.Labels)
		out[i] = n
	}
	return out
}

// newUID returns a random UUID-shaped string, so that runs sharing a cloud account never reuse
// a UID.
func newUID(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("generating UID: %v", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
