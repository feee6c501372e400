package baremetal_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
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
// addresses owned Services report before handing out any, and ignores other classes.
func TestRebuildFromStatus(t *testing.T) {
	other := "other-class"
	svc := func(name string, class *string, created int64, ips ...string) corev1.Service {
		s := corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	src := &staticSource{
		pools: []v1alpha1.AddressPool{pool("p", "198.18.1.1-198.18.1.4")},
		svcs: []corev1.Service{
			svc("held", nil, 1, "198.18.1.1"),
			svc("foreign", &other, 2, "198.18.1.2"), // another provider's: not ours
			svc("dup", nil, 3, "198.18.1.1"),        // a duplicate from an old bug: the older keeps it
		},
	}
	p := baremetal.New(baremetal.Options{Source: src, Owns: func(c *string) bool { return c == nil }})
	ensure := func(name string) netip.Addr {
		t.Helper()
		st, err := p.Ensure(context.Background(), &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: name, UID: name},
			IPFamilies: []providers.IPFamily{providers.IPv4}, Ports: []providers.Port{{Protocol: providers.TCP, Port: 80}}})
		if err != nil {
			t.Fatalf("Ensure %s: %v", name, err)
		}
		return st.Ingress[0].IP
	}
	if got := ensure("new"); got != netip.MustParseAddr("198.18.1.2") {
		t.Errorf("new Service got %s, want 198.18.1.2 (198.18.1.1 is held; the foreign class is not ours)", got)
	}
	if got := ensure("held"); got != netip.MustParseAddr("198.18.1.1") {
		t.Errorf("held Service got %s, want its 198.18.1.1", got)
	}
	if got := ensure("dup"); got != netip.MustParseAddr("198.18.1.3") {
		t.Errorf("duplicate got %s, want a fresh 198.18.1.3", got)
	}
}
