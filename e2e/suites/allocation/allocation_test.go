package allocation_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/controllers/service"
)

// TestRestartKeepsAddresses: a new controller (restart) keeps every address and hands out
// none that is held; allocateLoadBalancerNodePorts=false is served.
func TestRestartKeepsAddresses(t *testing.T) {
	e := newEnv(t)
	e.pool("restart", nil, "198.18.160.0/29") // .1-.6
	c := e.start(false)
	want := map[string]netip.Addr{}
	for i := range 3 {
		name := fmt.Sprint("s", i)
		e.svc(name, func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) })
		want[name] = e.waitIPs(name, 1)[0]
	}
	c.Stop()
	e.start(false)
	e.svc("late")
	late := e.waitIPs("late", 1)[0]
	for name, ip := range want {
		if ip == late {
			t.Errorf("late Service got %s, held by %s", late, name)
		}
		if got := e.waitIPs(name, 1)[0]; got != ip {
			t.Errorf("%s moved from %s to %s across a restart", name, ip, got)
		}
	}
}

// TestConcurrentCreatesAndExhaustion: 100 Services created at once get 100 distinct addresses
// from a pool of exactly 100; the 101st stays pending with a condition and an Event, the pool
// status shows it full, and nothing else moves.
func TestConcurrentCreatesAndExhaustion(t *testing.T) {
	e := newEnv(t)
	e.pool("hundred", nil, "198.18.161.0-198.18.161.99")
	e.start(false)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { e.svc(fmt.Sprint("c", i)) })
	}
	wg.Wait()
	owner := map[netip.Addr]string{}
	for i := range 100 {
		name := fmt.Sprint("c", i)
		ip := e.waitIPs(name, 1)[0]
		if prev, dup := owner[ip]; dup {
			t.Errorf("%s and %s both hold %s", prev, name, ip)
		}
		owner[ip] = name
	}
	e.svc("extra")
	c := e.waitCondition("extra", service.ReasonPending)
	if !strings.Contains(c.Message, "no free IPv4 address in pool(s) hundred") {
		t.Errorf("pending message = %q", c.Message)
	}
	e.waitEvent(e.ns, "extra", service.ReasonPending)
	e.eventually("pool status 100 assigned, 0 available", func() bool {
		st := e.getPool("hundred").Status
		return st.IPv4 != nil && *st.IPv4 == (v1alpha1.FamilyUsage{Assigned: 100, Available: 0})
	})
	for ip, name := range owner {
		if got := e.ips(name); !slices.Equal(got, []netip.Addr{ip}) {
			t.Errorf("%s moved from %s to %v", name, ip, got)
		}
	}
	// Freeing one address serves the pending Service. (Read before the delete: the controller
	// may clear c0's status before a read after it.)
	freed := e.ips("c0")
	if err := e.cs.CoreV1().Services(e.ns).Delete(context.Background(), "c0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.waitIPs("extra", 1); !slices.Equal(got, freed) {
		t.Errorf("extra got %v, want the freed %v", got, freed)
	}
}

// TestTwoReplicas: two controllers compete for the Lease; the leader is stopped half way; all
// Services end with distinct addresses and none moves at the handover.
func TestTwoReplicas(t *testing.T) {
	e := newEnv(t)
	e.pool("replicas", nil, "198.18.162.0/27")
	a := e.start(true)
	e.start(true)
	for i := range 10 {
		e.svc(fmt.Sprint("r", i))
	}
	before := map[string]netip.Addr{}
	for i := range 10 {
		name := fmt.Sprint("r", i)
		before[name] = e.waitIPs(name, 1)[0]
	}
	a.Stop() // if a was not the leader the other one keeps going; either way one acts
	for i := 10; i < 20; i++ {
		e.svc(fmt.Sprint("r", i))
	}
	owner := map[netip.Addr]string{}
	for i := range 20 {
		name := fmt.Sprint("r", i)
		ip := e.waitIPs(name, 1)[0]
		if prev, dup := owner[ip]; dup {
			t.Errorf("%s and %s both hold %s", prev, name, ip)
		}
		owner[ip] = name
		if old, ok := before[name]; ok && old != ip {
			t.Errorf("%s moved from %s to %s at the handover", name, old, ip)
		}
	}
}

// TestSharingAndMetalLBKeys: MetalLB's keys request an address and share it; a port clash
// gets its own address; a Local Service with another selector cannot join.
func TestSharingAndMetalLBKeys(t *testing.T) {
	e := newEnv(t)
	e.pool("share", nil, "198.18.163.0/29")
	e.pool("manual", func(ap *v1alpha1.AddressPool) { ap.Spec.AutoAssign = ptr.To(false) }, "198.18.164.0/29")
	e.start(false)
	share := func(key string, port int32, local bool) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{annotations.MetalLBLegacyAllowSharedIP: key}
			s.Spec.Ports[0].Port = port
			s.Spec.Selector = map[string]string{"app": "shared"}
			if local {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}
		}
	}
	e.svc("web", share("k", 80, false), func(s *corev1.Service) {
		s.Annotations[annotations.MetalLBLegacyLoadBalancerIPs] = "198.18.163.5"
	})
	if got := e.waitIPs("web", 1)[0]; got != netip.MustParseAddr("198.18.163.5") {
		t.Fatalf("web got %s, want the requested 198.18.163.5", got)
	}
	// tls first and alone: once clash holds a second address under key k, tls could
	// rightly share either one.
	e.svc("tls", share("k", 443, false))
	if got := e.waitIPs("tls", 1)[0]; got != netip.MustParseAddr("198.18.163.5") {
		t.Errorf("tls got %s, want the shared 198.18.163.5", got)
	}
	e.svc("clash", share("k", 80, false))
	e.svc("local", share("k", 8080, true))
	for _, name := range []string{"clash", "local"} {
		if got := e.waitIPs(name, 1)[0]; got == netip.MustParseAddr("198.18.163.5") {
			t.Errorf("%s shares 198.18.163.5 against the sharing rules", name)
		}
	}
	e.svc("pinned", func(s *corev1.Service) { s.Annotations = map[string]string{annotations.MetalLBAddressPool: "manual"} })
	if got := e.waitIPs("pinned", 1)[0]; !netip.MustParsePrefix("198.18.164.0/29").Contains(got) {
		t.Errorf("pinned got %s, want one from pool manual", got)
	}
	e.svc("taken", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.18.163.5" })
	c := e.waitCondition("taken", service.ReasonInvalidSpec)
	if !strings.Contains(c.Message, "held by") {
		t.Errorf("taken condition = %q", c.Message)
	}
}

// TestDualStack: RequireDualStack gets one address per family; PreferDualStack on a pool of
// one family gets that one.
func TestDualStack(t *testing.T) {
	e := newEnv(t)
	e.pool("dual", nil, "198.18.165.0/29", "fd00:c613:165::/125")
	e.pool("v4only", func(ap *v1alpha1.AddressPool) { ap.Spec.AutoAssign = ptr.To(false) }, "198.18.166.0/29")
	e.start(false)
	dual := func(p corev1.IPFamilyPolicy) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = &p
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}
	}
	e.svc("require", dual(corev1.IPFamilyPolicyRequireDualStack))
	ips := e.waitIPs("require", 2)
	if !ips[0].Is6() || !ips[1].Is4() {
		t.Errorf("require got %v, want IPv6 then IPv4", ips)
	}
	e.svc("prefer", dual(corev1.IPFamilyPolicyPreferDualStack), func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.AddressPool: "v4only"}
	})
	if ips := e.waitIPs("prefer", 1); !ips[0].Is4() {
		t.Errorf("prefer got %v, want one IPv4 address", ips)
	}
	e.svc("require-v4only", dual(corev1.IPFamilyPolicyRequireDualStack), func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.AddressPool: "v4only"}
	})
	c := e.waitCondition("require-v4only", service.ReasonInvalidSpec)
	if !strings.Contains(c.Message, "no IPv6 addresses") {
		t.Errorf("condition = %q", c.Message)
	}
}

// TestMoveBetweenPools: changing the address-pool annotation moves the Service; its old address
// is free at once and goes to the next Service.
func TestMoveBetweenPools(t *testing.T) {
	e := newEnv(t)
	e.pool("from", nil, "198.18.167.1/32")
	e.pool("to", func(ap *v1alpha1.AddressPool) { ap.Spec.AutoAssign = ptr.To(false) }, "198.18.168.1/32")
	e.start(false)
	e.svc("mover")
	old := e.waitIPs("mover", 1)[0]
	e.update("mover", func(s *corev1.Service) { s.Annotations = map[string]string{annotations.AddressPool: "to"} })
	e.eventually("mover in pool to", func() bool {
		ips := e.ips("mover")
		return len(ips) == 1 && ips[0] == netip.MustParseAddr("198.18.168.1")
	})
	e.svc("next")
	if got := e.waitIPs("next", 1)[0]; got != old {
		t.Errorf("next got %s, want the released %s", got, old)
	}
}

// TestInvalidPools: a bad pool and an overlapping younger pool get a status condition and an
// Event, serve nothing new, and disturb neither the good pool nor the Services. The bad pool's
// fault is one the CRD cannot see (two of its own entries overlap); what it can see the API
// server refuses (operations TestCRDValidation).
func TestInvalidPools(t *testing.T) {
	e := newEnv(t)
	e.pool("good", nil, "198.18.169.0/30")
	e.start(false)
	e.svc("a")
	held := e.waitIPs("a", 1)[0]
	e.pool("overlap", nil, "198.18.169.0/29")
	e.pool("broken", nil, "198.18.170.0/29", "198.18.170.4/30")
	e.eventually("overlap Conflict=True", func() bool {
		return meta.IsStatusConditionTrue(e.getPool("overlap").Status.Conditions, v1alpha1.ConditionConflict)
	})
	e.eventually("broken Valid=False", func() bool {
		return meta.IsStatusConditionFalse(e.getPool("broken").Status.Conditions, v1alpha1.ConditionValid)
	})
	if msg := e.waitEvent("default", "broken", "InvalidSpec"); !strings.Contains(msg, "overlaps 198.18.170.0/29 of the same pool") {
		t.Errorf("event message = %q", msg)
	}
	e.waitEvent("default", "overlap", "Overlapping")
	if !meta.IsStatusConditionTrue(e.getPool("good").Status.Conditions, v1alpha1.ConditionValid) ||
		meta.IsStatusConditionTrue(e.getPool("good").Status.Conditions, v1alpha1.ConditionConflict) {
		t.Errorf("good pool disturbed: %+v", e.getPool("good").Status.Conditions)
	}
	e.svc("b")
	b := e.waitIPs("b", 1)[0]
	if !netip.MustParsePrefix("198.18.169.0/30").Contains(b) || b == held {
		t.Errorf("b got %s, want the good pool's other address", b)
	}
	e.svc("c")
	e.waitCondition("c", service.ReasonPending) // overlap and broken serve nothing
	if got := e.ips("a"); !slices.Equal(got, []netip.Addr{held}) {
		t.Errorf("a moved from %s to %v", held, got)
	}
}
