package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/servicerules"
)

func TestCreateUpdateDelete(t *testing.T) {
	e := newEnv(t, envOptions{})
	svc := e.create(e.lbService("web"))

	got := e.waitIngress("web")
	if !hasFinalizer(got) {
		t.Errorf("finalizer %s missing: %v", service.Finalizer, got.Finalizers)
	}
	ing := got.Status.LoadBalancer.Ingress[0]
	if ip, err := netip.ParseAddr(ing.IP); err != nil || !netip.MustParsePrefix("198.18.128.0/20").Contains(ip) {
		t.Errorf("ingress IP %q not from the provider's pool", ing.IP)
	}
	if ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ingress ipMode = %v, want VIP", ing.IPMode)
	}
	e.waitCondition("web", metav1.ConditionTrue, service.ReasonProvisioned)
	e.waitEvent("web", service.EventEnsuring)
	e.waitEvent("web", service.EventEnsured)

	// Ports.
	e.update("web", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	})
	e.desired(svc, "two ports", func(lb *providers.LoadBalancer) bool { return len(lb.Ports) == 2 && lb.Ports[1].Port == 443 })
	// Source ranges: the spec wins over the annotation.
	e.update("web", func(s *corev1.Service) {
		s.Annotations = map[string]string{"service.beta.kubernetes.io/load-balancer-source-ranges": "198.18.50.0/24"}
	})
	e.desired(svc, "annotation source range", func(lb *providers.LoadBalancer) bool {
		return slices.Equal(lb.SourceRanges, []netip.Prefix{netip.MustParsePrefix("198.18.50.0/24")})
	})
	e.update("web", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"198.18.60.0/24"} })
	e.desired(svc, "spec source range wins", func(lb *providers.LoadBalancer) bool {
		return slices.Equal(lb.SourceRanges, []netip.Prefix{netip.MustParsePrefix("198.18.60.0/24")})
	})
	// Traffic policy: Local brings a health-check node port.
	e.update("web", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	lb := e.desired(svc, "local traffic policy", func(lb *providers.LoadBalancer) bool { return lb.LocalTrafficOnly })
	if cur := e.get("web"); lb.HealthCheckNodePort == 0 || lb.HealthCheckNodePort != cur.Spec.HealthCheckNodePort {
		t.Errorf("healthCheckNodePort in model = %d, Service has %d", lb.HealthCheckNodePort, cur.Spec.HealthCheckNodePort)
	}
	if ip := e.get("web").Status.LoadBalancer.Ingress[0].IP; ip != ing.IP {
		t.Errorf("ingress address changed on update: %s -> %s", ing.IP, ip)
	}

	// A change that does not alter the model (an annotation Portico does not read) costs no
	// provider call.
	time.Sleep(500 * time.Millisecond)
	calls := e.prov.Calls()[reference.OpEnsure]
	e.update("web", func(s *corev1.Service) { s.Annotations["example.com/unrelated"] = "x" })
	time.Sleep(time.Second)
	if n := e.prov.Calls()[reference.OpEnsure] - calls; n != 0 {
		t.Errorf("an unrelated annotation caused %d provider calls", n)
	}

	// Delete: the provider cleans up, then the finalizer goes and the Service disappears.
	if err := e.cs.CoreV1().Services(e.ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("service gone", func() (bool, error) {
		_, err := e.cs.CoreV1().Services(e.ns).Get(context.Background(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := e.prov.Get(context.Background(), e.ref(svc)); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("provider still has the load balancer after delete: %v", err)
	}
}

func TestTypeChangeCleansUp(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(e.lbService("web"))
	e.waitIngress("web")
	e.update("web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
		s.Spec.AllocateLoadBalancerNodePorts = nil
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
		s.Spec.ExternalTrafficPolicy = ""
	})
	e.eventually("finalizer and status removed", func() (bool, error) {
		s := e.get("web")
		return !hasFinalizer(s) && len(s.Status.LoadBalancer.Ingress) == 0 && len(s.Status.Conditions) == 0, nil
	})
	if refs := e.prov.Refs(); len(refs) != 0 {
		t.Errorf("provider still holds %v after the type change", refs)
	}
	e.waitEvent("web", service.EventDeleted)
}

func TestOtherClassesUntouched(t *testing.T) {
	e := newEnv(t, envOptions{})
	other := e.lbService("other", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/someone-else") })
	e.create(other)
	// A class-less Service another controller (the stock one) holds with its finalizer.
	classless := e.lbService("classless", func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = nil
		s.Finalizers = []string{service.StockFinalizer}
	})
	e.create(classless)
	t.Cleanup(func() { e.update("classless", func(s *corev1.Service) { s.Finalizers = nil }) })
	// A Service created afterwards and provisioned shows the controller has processed the queue.
	e.create(e.lbService("mine"))
	e.waitIngress("mine")
	time.Sleep(2 * time.Second)
	for _, name := range []string{"other", "classless"} {
		s := e.get(name)
		want := map[string][]string{"classless": {service.StockFinalizer}}[name]
		if !slices.Equal(s.Finalizers, want) || len(s.Status.LoadBalancer.Ingress) != 0 || len(s.Status.Conditions) != 0 {
			t.Errorf("%s was touched: finalizers=%v status=%+v", name, s.Finalizers, s.Status)
		}
		if ev := e.events(name); len(ev) != 0 {
			t.Errorf("%s got events %v", name, ev)
		}
	}
	if n := len(e.prov.Refs()); n != 1 {
		t.Errorf("provider holds %d load balancers, want 1", n)
	}
}

// TestClasslessStockFinalizer: owning class-less Services, the controller is their load-balancer
// controller in place of the stock one and uses the stock finalizer: it adopts the one a Service
// from the stock controller carries, trades Portico's own for it on a Service from an older
// Portico, and removes it once the load balancer is deleted, so no deletion hangs.
func TestClasslessStockFinalizer(t *testing.T) {
	e := newEnv(t, envOptions{classless: true})
	classless := func(finalizers ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerClass, s.Finalizers = nil, finalizers }
	}
	names := map[string][]string{"fresh": nil, "from-stock": {service.StockFinalizer}, "from-portico": {service.Finalizer}}
	for name, finalizers := range names {
		e.create(e.lbService(name, classless(finalizers...)))
	}
	for name := range names {
		e.waitIngress(name)
		e.eventually(name+" to carry the stock finalizer alone", func() (bool, error) {
			return slices.Equal(e.get(name).Finalizers, []string{service.StockFinalizer}), nil
		})
	}
	for name := range names {
		e.svcs().Delete(name)
	}
	for name := range names {
		e.svcs().WaitGone(name)
	}
	// (A class-less controller owns class-less Services in every namespace: count this test's.)
	for _, ref := range e.prov.Refs() {
		if ref.Namespace == e.ns {
			t.Errorf("provider still holds %v after the deletions", ref)
		}
	}
}

func TestClasslessOwnership(t *testing.T) {
	e := newEnv(t, envOptions{classless: true})
	e.create(e.lbService("plain", func(s *corev1.Service) { s.Spec.LoadBalancerClass = nil }))
	e.waitIngress("plain")
	e.create(e.lbService("classed"))
	time.Sleep(2 * time.Second)
	if s := e.get("classed"); len(s.Finalizers) != 0 || len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("classed Service was touched by a class-less controller: %+v", s.Status)
	}
}

func TestInvalidAnnotationReportedWithoutProviderCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(e.lbService("bad", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portico-lb.io/internal": "yes"}
	}))
	s := e.waitCondition("bad", metav1.ConditionFalse, service.ReasonInvalidSpec)
	e.waitEvent("bad", service.EventInvalidSpec)
	if n := e.prov.Calls()[reference.OpEnsure]; n != 0 {
		t.Errorf("provider Ensure called %d times for an invalid Service", n)
	}
	if len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("invalid Service got an ingress: %+v", s.Status.LoadBalancer)
	}

	// A working load balancer is not torn down when its Service becomes invalid.
	good := e.create(e.lbService("good"))
	ing := e.waitIngress("good").Status.LoadBalancer.Ingress
	calls := e.prov.Calls()[reference.OpEnsure]
	e.update("good", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portico-lb.io/internal": "yes"}
	})
	s = e.waitCondition("good", metav1.ConditionFalse, service.ReasonInvalidSpec)
	if _, err := e.prov.Get(context.Background(), e.ref(good)); err != nil {
		t.Errorf("load balancer gone after an invalid update: %v", err)
	}
	if !slices.EqualFunc(s.Status.LoadBalancer.Ingress, ing, func(a, b corev1.LoadBalancerIngress) bool { return a.IP == b.IP }) {
		t.Errorf("ingress changed after an invalid update: %v -> %v", ing, s.Status.LoadBalancer.Ingress)
	}
	if n := e.prov.Calls()[reference.OpEnsure]; n != calls {
		t.Errorf("provider called %d more times after an invalid update", n-calls)
	}
	// Fixing the annotation makes it ready again.
	e.update("good", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portico-lb.io/internal": "true"}
	})
	e.waitCondition("good", metav1.ConditionTrue, service.ReasonProvisioned)
}

// TestProviderWarningsBecomeEvents: a setting the provider ignores is a Warning Event on the
// Service, reported when the model changes (not on every resync), and the load balancer works.
func TestProviderWarningsBecomeEvents(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.prov.WarnWith("metadata.annotations[example]: ignored by this provider")
	e.create(e.lbService("warned"))
	e.waitIngress("warned")
	e.waitEvent("warned", service.EventSettingIgnored)
}

func TestUnsupportedSpecFields(t *testing.T) {
	caps := providers.Capabilities{NeedsNodePorts: true}
	e := newEnv(t, envOptions{caps: &caps})
	e.create(e.lbService("noports", func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }))
	e.create(e.lbService("affinity", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }))
	e.create(e.lbService("mixed", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	}))
	for name, field := range map[string]string{"noports": "spec.ports[0].nodePort", "affinity": "spec.sessionAffinity", "mixed": "spec.ports"} {
		s := e.waitCondition(name, metav1.ConditionFalse, service.ReasonInvalidSpec)
		msg := s.Status.Conditions[0].Message
		if !strings.Contains(msg, field) {
			t.Errorf("%s: condition message %q does not name %s", name, msg, field)
		}
	}
	if n := e.prov.Calls()[reference.OpEnsure]; n != 0 {
		t.Errorf("provider Ensure called %d times for unsupported Services", n)
	}
}

func TestMixedProtocolsAndAffinity(t *testing.T) {
	e := newEnv(t, envOptions{})
	svc := e.create(e.lbService("dns", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(5353)},
			{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	}))
	lb := e.desired(svc, "TCP and UDP on port 53", func(lb *providers.LoadBalancer) bool { return len(lb.Ports) == 2 })
	if lb.Ports[0].Protocol != providers.TCP || lb.Ports[1].Protocol != providers.UDP || lb.Ports[0].NodePort == 0 || lb.Ports[1].NodePort == 0 {
		t.Errorf("ports = %+v", lb.Ports)
	}
	if !lb.SessionAffinity.ClientIP || lb.SessionAffinity.Timeout != time.Minute {
		t.Errorf("affinity = %+v", lb.SessionAffinity)
	}
}

func TestTransientProviderErrorRetries(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.prov.FailNext(reference.OpEnsure, errors.New("cloud API throttled"))
	e.create(e.lbService("web"))
	e.waitEvent("web", service.EventSyncFailed)
	e.waitIngress("web")
	e.waitCondition("web", metav1.ConditionTrue, service.ReasonProvisioned)
}

func TestRetryErrorWaitsFixedDelay(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.prov.FailNext(reference.OpEnsure, providers.RetryAfter(time.Second, "load balancer is still provisioning"))
	start := time.Now()
	e.create(e.lbService("web"))
	// The Pending condition lasts only the retry delay; the Event stays.
	e.waitEvent("web", service.ReasonPending)
	e.waitCondition("web", metav1.ConditionTrue, service.ReasonProvisioned)
	if d := time.Since(start); d < time.Second {
		t.Errorf("provisioned after %s, before the provider's 1s retry delay", d)
	}
	if n := e.prov.Calls()[reference.OpEnsure]; n != 2 {
		t.Errorf("provider Ensure called %d times, want 2 (retry, then success)", n)
	}
}

func TestNodeChanges(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	names := []string{e.ns + "-a", e.ns + "-b", e.ns + "-c"}
	for i, n := range names {
		if _, err := testCluster.RegisterNode(ctx, nodeSpec(n, i)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	svc := e.create(e.lbService("web"))
	e.desired(svc, "all three test nodes", func(lb *providers.LoadBalancer) bool { return countNodes(lb, names) == 3 })
	time.Sleep(time.Second)
	base := e.prov.Calls()[reference.OpEnsure]

	// Excluding one node costs exactly one provider call.
	patchNode(t, e, names[0], func(n *corev1.Node) { n.Labels = map[string]string{servicerules.ExcludeFromLBLabel: "true"} })
	e.desired(svc, "excluded node removed", func(lb *providers.LoadBalancer) bool { return countNodes(lb, names) == 2 })
	time.Sleep(time.Second)
	if n := e.prov.Calls()[reference.OpEnsure] - base; n != 1 {
		t.Errorf("excluding a node made %d provider calls, want 1", n)
	}
	// The value "false" keeps the node.
	patchNode(t, e, names[0], func(n *corev1.Node) { n.Labels = map[string]string{servicerules.ExcludeFromLBLabel: "false"} })
	e.desired(svc, "label=false keeps node", func(lb *providers.LoadBalancer) bool { return countNodes(lb, names) == 3 })
	// The autoscaler's deletion taint removes it.
	patchNode(t, e, names[1], func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: servicerules.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	})
	e.desired(svc, "tainted node removed", func(lb *providers.LoadBalancer) bool { return countNodes(lb, names) == 2 })
	time.Sleep(time.Second)
	// A readiness flip changes no backend set: no provider call.
	before := e.prov.Calls()[reference.OpEnsure]
	spec := nodeSpec(names[2], 2)
	spec.NotReady = true
	if _, err := testCluster.RegisterNode(ctx, spec); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := e.prov.Calls()[reference.OpEnsure] - before; n != 0 {
		t.Errorf("a readiness change made %d provider calls, want 0", n)
	}
}

func TestDriftRepairedByResync(t *testing.T) {
	e := newEnv(t, envOptions{resync: 2 * time.Second})
	e.create(e.lbService("web"))
	e.waitIngress("web")
	if !e.prov.Drift(e.ref(e.get("web"))) {
		t.Fatal("provider has no load balancer to drift")
	}
	e.eventually("drift repaired", func() (bool, error) { return e.prov.Repairs() == 1, nil })
}

func TestLeaderElectionFailover(t *testing.T) {
	a := newEnv(t, envOptions{leaderElec: true})
	bProv := reference.New(reference.Options{Name: "test", Pool: netip.MustParsePrefix("198.18.144.0/20"),
		Capabilities: providers.Capabilities{MixedProtocols: true}})
	b := &env{t: t, ns: a.ns, class: a.class, cs: a.cs, prov: bProv}
	b.start(envOptions{leaderElec: true})

	a.create(a.lbService("first"))
	a.waitIngress("first")
	aCalls, bCalls := a.prov.Calls()[reference.OpEnsure], b.prov.Calls()[reference.OpEnsure]
	if (aCalls == 0) == (bCalls == 0) {
		t.Fatalf("exactly one replica must act: ensure calls a=%d b=%d", aCalls, bCalls)
	}
	leader, follower := a, b
	if bCalls > 0 {
		leader, follower = b, a
	}
	leader.shutdown()
	a.create(a.lbService("second"))
	follower.waitIngress("second")
	if follower.prov.Calls()[reference.OpEnsure] == 0 {
		t.Errorf("the follower did not take over")
	}
}

// TestIgnoreExcludeLB: with --ignore-exclude-lb a node labelled
// exclude-from-external-load-balancers is a backend like any other; without it, it is not.
func TestIgnoreExcludeLB(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "honoured", true: "ignored"}[ignore], func(t *testing.T) { testIgnoreExcludeLB(t, ignore) })
	}
}

func testIgnoreExcludeLB(t *testing.T, ignore bool) {
	ctx := context.Background()
	e := newEnv(t, envOptions{ignoreExclude: ignore})
	names := []string{e.ns + "-plain", e.ns + "-labelled"}
	for i, n := range names {
		spec := nodeSpec(n, 20+i)
		if i == 1 {
			spec.Labels = map[string]string{servicerules.ExcludeFromLBLabel: "true"}
		}
		if _, err := testCluster.RegisterNode(ctx, spec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	want := map[bool]int{false: 1, true: 2}[ignore]
	svc := e.create(e.lbService("web"))
	lb := e.desired(svc, fmt.Sprintf("%d of the two test nodes (ignore-exclude-lb %v)", want, ignore), func(lb *providers.LoadBalancer) bool {
		return countNodes(lb, names) == want
	})
	if ignore != slices.ContainsFunc(lb.Nodes, func(n providers.Node) bool { return n.Name == names[1] }) {
		t.Errorf("ignore-exclude-lb %v: backends %v", ignore, lb.Nodes)
	}
}

func nodeSpec(name string, i int) cluster.NodeSpec {
	return cluster.NodeSpec{Name: name, InternalIPs: []netip.Addr{netip.AddrFrom4([4]byte{198, 19, 200, byte(10 + i)})}}
}

func patchNode(t *testing.T, e *env, name string, mutate func(*corev1.Node)) {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(n)
	if _, err := e.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func countNodes(lb *providers.LoadBalancer, names []string) int {
	n := 0
	for _, node := range lb.Nodes {
		if slices.Contains(names, node.Name) {
			n++
		}
	}
	return n
}

// TestLosingClassKeepsLoadBalancer: the same controller restarted without the Service's class
// (and the same provider behind it) keeps the load balancer, the finalizer and the address, and
// says why with the condition (issue 31 item 1; e2e/suites/operations has the day-two cases).
func TestLosingClassKeepsLoadBalancer(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(e.lbService("web"))
	was := e.waitIngress("web")
	e.shutdown()

	ownClass := e.class
	e.class = ownClass + "-other"
	e.start(envOptions{})
	s := e.waitCondition("web", metav1.ConditionFalse, service.ReasonClassNotServed)
	if !hasFinalizer(s) || len(s.Status.LoadBalancer.Ingress) == 0 || s.Status.LoadBalancer.Ingress[0].IP != was.Status.LoadBalancer.Ingress[0].IP {
		t.Errorf("finalizers %v, ingress %v; want both kept", s.Finalizers, s.Status.LoadBalancer.Ingress)
	}
	if n := e.prov.Calls()[reference.OpDelete]; n != 0 || len(e.prov.Refs()) != 1 {
		t.Errorf("provider: %d Delete calls, holds %v", n, e.prov.Refs())
	}
}

func TestRequestedIPs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(e.lbService("by-annotation", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": "198.18.130.77"}
	}))
	e.create(e.lbService("by-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.18.130.78" }))
	for name, want := range map[string]string{"by-annotation": "198.18.130.77", "by-spec": "198.18.130.78"} {
		if got := e.waitIngress(name).Status.LoadBalancer.Ingress[0].IP; got != want {
			t.Errorf("%s: ingress %s, want the requested %s", name, got, want)
		}
	}
	// A request the provider cannot honour (outside its pool) is reported, not silently replaced.
	e.create(e.lbService("outside", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.18.250.1" }))
	s := e.waitCondition("outside", metav1.ConditionFalse, service.ReasonInvalidSpec)
	if len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("outside: got ingress %v", s.Status.LoadBalancer.Ingress)
	}
}

// TestInvalidSourceRangesReported: a source-range annotation Portico rejects (a repeated CIDR,
// which the apiserver accepts) is reported on the Service with its field path, and
// the working load balancer and its ingress are kept. e2e/suites/dataplane's
// TestInvalidSourceRangesNeverHalfApplied shows by packets what the agent does meanwhile.
func TestInvalidSourceRangesReported(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(e.lbService("ranges", func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.SourceRanges: "198.18.5.0/24"}
	}))
	ing := e.waitIngress("ranges").Status.LoadBalancer.Ingress
	e.update("ranges", func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.SourceRanges: "198.18.5.0/24, 198.18.5.0/24"}
	})
	s := e.waitCondition("ranges", metav1.ConditionFalse, service.ReasonInvalidSpec)
	if msg, want := s.Status.Conditions[0].Message, "metadata.annotations["+annotations.SourceRanges+"]"; !strings.Contains(msg, want) {
		t.Errorf("condition message %q does not name %s", msg, want)
	}
	e.waitEvent("ranges", service.EventInvalidSpec)
	if !slices.EqualFunc(s.Status.LoadBalancer.Ingress, ing, func(a, b corev1.LoadBalancerIngress) bool { return a.IP == b.IP }) {
		t.Errorf("ingress changed after an invalid update: %v -> %v", ing, s.Status.LoadBalancer.Ingress)
	}
}
