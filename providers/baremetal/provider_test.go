package baremetal_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/providertest"
)

// staticSource is a Source over fixed objects, for unit tests; e2e/baremetal runs the same
// provider against the real API server.
type staticSource struct {
	mu    sync.Mutex
	pools []v1alpha1.AddressPool
	svcs  []corev1.Service
}

func (s *staticSource) AddressPools(context.Context) ([]v1alpha1.AddressPool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]v1alpha1.AddressPool(nil), s.pools...), nil
}

func (s *staticSource) Services(context.Context) ([]corev1.Service, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]corev1.Service(nil), s.svcs...), nil
}

func (s *staticSource) WatchedServices(ctx context.Context) ([]corev1.Service, error) {
	return s.Services(ctx)
}

func (s *staticSource) NamespaceLabels(context.Context, string) (map[string]string, error) {
	return nil, nil
}

func pool(name string, addrs ...string) v1alpha1.AddressPool {
	return v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{Addresses: addrs}}
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providers.Provider {
		return baremetal.New(baremetal.Options{Source: &staticSource{pools: []v1alpha1.AddressPool{
			pool("default", "198.18.128.0/24", "2001:db8:128::/120"),
		}}})
	}, providertest.Options{RequestableIP: netip.MustParseAddr("198.18.128.77"), Concurrency: 100})
}

// TestConcurrentEnsureDistinct: 100 Services ensured at once on one provider get 100 distinct
// addresses from a pool of exactly 100.
func TestConcurrentEnsureDistinct(t *testing.T) {
	p := baremetal.New(baremetal.Options{Source: &staticSource{pools: []v1alpha1.AddressPool{pool("p", "198.18.1.0-198.18.1.99")}}})
	const n = 100
	got := make([]netip.Addr, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			lb := &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: fmt.Sprint("s", i), UID: fmt.Sprint(i)},
				IPFamilies: []providers.IPFamily{providers.IPv4}, Ports: []providers.Port{{Protocol: providers.TCP, Port: 80}}}
			st, err := p.Ensure(context.Background(), lb)
			if err == nil {
				got[i] = st.Ingress[0].IP
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Ensure s%d: %v", i, errs[i])
		}
		if prev, dup := seen[got[i]]; dup {
			t.Fatalf("s%d and s%d both got %s", prev, i, got[i])
		}
		seen[got[i]] = i
	}
	// The pool is now full: the 101st pends (a RetryError), it is not invalid.
	_, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: "extra"}, IPFamilies: []providers.IPFamily{providers.IPv4}})
	if _, ok := err.(*providers.RetryError); !ok {
		t.Fatalf("Ensure on a full pool = %v (%T), want *providers.RetryError", err, err)
	}
}

// TestRebuildFromStatus: a new provider (a restarted or newly elected controller) takes the
// addresses owned Services report before handing out any; an address a Service of another
// class holds is not handed out either (issue 31, item 4: this test asserted the opposite).
func TestRebuildFromStatus(t *testing.T) {
	other := "other-class"
	src := &staticSource{
		pools: []v1alpha1.AddressPool{pool("p", "198.18.1.1-198.18.1.5")},
		svcs: []corev1.Service{
			lbService("held", nil, 1, "198.18.1.1"),
			lbService("foreign", &other, 2, "198.18.1.2"), // another provider's: reserved
			lbService("dup", nil, 3, "198.18.1.1"),        // a duplicate from an old bug: the older keeps it
		},
	}
	p := baremetal.New(baremetal.Options{Source: src, Owns: func(c *string) bool { return c == nil }})
	if got := ensureIP(t, p, "new"); got != netip.MustParseAddr("198.18.1.3") {
		t.Errorf("new Service got %s, want 198.18.1.3 (198.18.1.1 is held, 198.18.1.2 held by a Service of another class)", got)
	}
	if got := ensureIP(t, p, "held"); got != netip.MustParseAddr("198.18.1.1") {
		t.Errorf("held Service got %s, want its 198.18.1.1", got)
	}
	if got := ensureIP(t, p, "dup"); got != netip.MustParseAddr("198.18.1.4") {
		t.Errorf("duplicate got %s, want a fresh 198.18.1.4", got)
	}
}

// TestForeignClaimsReserved: whatever another class's Service holds (its status) or requests
// (spec.loadBalancerIP, the loadBalancerIPs annotation or an alias), seen after the rebuild
// too, is never handed to a Service of this provider: not chosen, not granted on request, not
// adopted from its own status. Class-less Services are foreign to a provider that serves
// classes only.
func TestForeignClaimsReserved(t *testing.T) {
	metallb := "metallb.io/x"
	src := &staticSource{pools: []v1alpha1.AddressPool{pool("p", "198.18.2.1-198.18.2.8")}}
	mine := "portico-lb.io/bm"
	p := baremetal.New(baremetal.Options{Source: src, Owns: func(c *string) bool { return c != nil && *c == mine }})
	if got := ensureIP(t, p, "first"); got != netip.MustParseAddr("198.18.2.1") {
		t.Fatalf("first Service got %s, want 198.18.2.1", got)
	}
	// After the rebuild: another implementation's Service, a class-less one, one requesting.
	src.mu.Lock()
	src.svcs = append(src.svcs,
		lbService("theirs", &metallb, 10, "198.18.2.2"),
		lbService("classless", nil, 11, "198.18.2.3"),
		func() corev1.Service {
			s := lbService("requests", &metallb, 12)
			s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": "198.18.2.4"}
			return s
		}(),
		func() corev1.Service {
			s := lbService("legacy", &metallb, 13)
			s.Spec.LoadBalancerIP = "198.18.2.5"
			return s
		}(),
		lbService("cip", nil, 14, "198.18.2.6"), // not a LoadBalancer: claims nothing
	)
	src.svcs[len(src.svcs)-1].Spec.Type = corev1.ServiceTypeClusterIP
	src.mu.Unlock()
	if got := ensureIP(t, p, "second"); got != netip.MustParseAddr("198.18.2.6") {
		t.Errorf("second Service got %s, want 198.18.2.6 (.2-.5 are held or requested by Services of other classes)", got)
	}
	// The first keeps its address even if a foreign status names it later.
	if got := ensureIP(t, p, "first"); got != netip.MustParseAddr("198.18.2.1") {
		t.Errorf("first Service moved to %s", got)
	}
	// Asking for a held address is refused, naming the holder.
	_, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: "asks", UID: "asks"},
		IPFamilies: []providers.IPFamily{providers.IPv4}, RequestedIPs: []netip.Addr{netip.MustParseAddr("198.18.2.2")}})
	var invalid *providers.InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "ns/theirs (loadBalancerClass metallb.io/x)") {
		t.Errorf("requesting 198.18.2.2 = %v, want an InvalidError naming ns/theirs", err)
	}
	// A Service whose own status (written by someone else) names a foreign address does not
	// adopt it.
	st, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: "adopts", UID: "adopts"},
		IPFamilies: []providers.IPFamily{providers.IPv4}, CurrentIPs: []netip.Addr{netip.MustParseAddr("198.18.2.3")}})
	if err != nil || st.Ingress[0].IP == netip.MustParseAddr("198.18.2.3") {
		t.Errorf("Service reporting 198.18.2.3 got %v, %v; want another address", st, err)
	}
}

func lbService(name string, class *string, created int64, ips ...string) corev1.Service {
	s := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func ensureIP(t *testing.T, p *baremetal.Provider, name string) netip.Addr {
	t.Helper()
	st, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: name, UID: name},
		IPFamilies: []providers.IPFamily{providers.IPv4}, Ports: []providers.Port{{Protocol: providers.TCP, Port: 80}}})
	if err != nil {
		t.Fatalf("Ensure %s: %v", name, err)
	}
	return st.Ingress[0].IP
}

// staleSource serves, on each read, either the pools as they were or as they are now, as an
// informer cache that lags the API server would.
type staleSource struct {
	staticSource
	reads      atomic.Int64
	old, fresh []v1alpha1.AddressPool
}

func (s *staleSource) AddressPools(context.Context) ([]v1alpha1.AddressPool, error) {
	if s.reads.Add(1)%2 == 0 {
		return s.old, nil
	}
	return s.fresh, nil
}

// TestStalePoolsNeverDuplicate: concurrent Ensures that see different versions of the pools
// (one pool grew, another was deleted) never receive the same address: who holds what is the
// allocator's record, not the pools.
func TestStalePoolsNeverDuplicate(t *testing.T) {
	src := &staleSource{
		old:   []v1alpha1.AddressPool{pool("grows", "198.18.5.0-198.18.5.9"), pool("gone", "198.18.6.0-198.18.6.9")},
		fresh: []v1alpha1.AddressPool{pool("grows", "198.18.5.0-198.18.5.29")},
	}
	p := baremetal.New(baremetal.Options{Source: src})
	const n = 40
	got := make([]netip.Addr, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: fmt.Sprint("s", i), UID: fmt.Sprint(i)},
				IPFamilies: []providers.IPFamily{providers.IPv4}, Ports: []providers.Port{{Protocol: providers.TCP, Port: 80}}})
			if err == nil {
				got[i] = st.Ingress[0].IP
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	served := 0
	for i := range n {
		if errs[i] != nil {
			if _, ok := errs[i].(*providers.RetryError); !ok {
				t.Fatalf("Ensure s%d = %v, want success or a RetryError (exhausted)", i, errs[i])
			}
			continue
		}
		served++
		if prev, dup := seen[got[i]]; dup {
			t.Fatalf("s%d and s%d both got %s", prev, i, got[i])
		}
		seen[got[i]] = i
	}
	// Both views hold 30 addresses between them at most (10+10 old, 30 fresh, overlapping).
	if served < 20 {
		t.Errorf("%d of %d Services served, want at least 20 (every read offers at least 20 free addresses at first)", served, n)
	}
}
