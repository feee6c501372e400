package ccm_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/portico-lb/portico/controllers/ccm"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
)

const cluster = "kubernetes"

var pool = netip.MustParsePrefix("198.18.128.0/24")

func newBalancer(t *testing.T) (cloudprovider.LoadBalancer, *reference.Provider) {
	t.Helper()
	p := reference.New(reference.Options{Pool: pool, Capabilities: providers.Capabilities{MixedProtocols: true}})
	lb, ok := ccm.New(ccm.Options{Provider: p}).LoadBalancer()
	if !ok || lb == nil {
		t.Fatal("LoadBalancer() not supported")
	}
	return lb, p
}

func lbService(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func node(name, ip string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func ref(svc *corev1.Service) providers.Ref {
	return providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
}

func TestCloudSupportsOnlyLoadBalancers(t *testing.T) {
	c := ccm.New(ccm.Options{Provider: reference.New(reference.Options{})})
	if got := c.ProviderName(); got != "portico" {
		t.Errorf("ProviderName() = %q, want portico", got)
	}
	if _, ok := c.LoadBalancer(); !ok {
		t.Error("LoadBalancer() not supported")
	}
	if _, ok := c.Instances(); ok {
		t.Error("Instances() supported")
	}
	if _, ok := c.InstancesV2(); ok {
		t.Error("InstancesV2() supported")
	}
	if _, ok := c.Zones(); ok {
		t.Error("Zones() supported")
	}
	if _, ok := c.Clusters(); ok {
		t.Error("Clusters() supported")
	}
	if _, ok := c.Routes(); ok {
		t.Error("Routes() supported")
	}
	if !c.HasClusterID() {
		t.Error("HasClusterID() = false")
	}
}

func TestEnsureGetUpdateDelete(t *testing.T) {
	lb, p := newBalancer(t)
	svc := lbService("web")
	nodes := []*corev1.Node{node("n2", "10.0.0.2", nil), node("n1", "10.0.0.1", nil)}
	svcBefore, nodesBefore := svc.DeepCopy(), []*corev1.Node{nodes[0].DeepCopy(), nodes[1].DeepCopy()}

	if _, exists, err := lb.GetLoadBalancer(ctx(t), cluster, svc); err != nil || exists {
		t.Fatalf("GetLoadBalancer before Ensure = exists %v, err %v; want false, nil", exists, err)
	}

	st, err := lb.EnsureLoadBalancer(ctx(t), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if len(st.Ingress) != 1 || !pool.Contains(netip.MustParseAddr(st.Ingress[0].IP)) {
		t.Fatalf("ingress = %+v, want one IP from %s", st.Ingress, pool)
	}
	if st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ingress ipMode = %v, want VIP", st.Ingress[0].IPMode)
	}
	if !equality.Semantic.DeepEqual(svc, svcBefore) {
		t.Error("EnsureLoadBalancer modified the Service")
	}
	for i := range nodes {
		if !equality.Semantic.DeepEqual(nodes[i], nodesBefore[i]) {
			t.Errorf("EnsureLoadBalancer modified node %s", nodes[i].Name)
		}
	}
	desired, ok := p.Desired(ref(svc))
	if !ok {
		t.Fatal("provider has no load balancer after Ensure")
	}
	if got := nodeNames(desired); got != "n1,n2" {
		t.Errorf("desired nodes = %s, want n1,n2 (sorted)", got)
	}
	if len(desired.Ports) != 1 || desired.Ports[0].NodePort != 30080 {
		t.Errorf("desired ports = %+v, want port 80 -> node port 30080", desired.Ports)
	}

	got, exists, err := lb.GetLoadBalancer(ctx(t), cluster, svc)
	if err != nil || !exists {
		t.Fatalf("GetLoadBalancer = exists %v, err %v; want true, nil", exists, err)
	}
	if !equality.Semantic.DeepEqual(got, st) {
		t.Errorf("GetLoadBalancer status = %+v, want %+v", got, st)
	}
	if name := lb.GetLoadBalancerName(ctx(t), cluster, svc); name != cloudprovider.DefaultLoadBalancerName(svc) {
		t.Errorf("GetLoadBalancerName = %q, want the stock default %q", name, cloudprovider.DefaultLoadBalancerName(svc))
	}

	// A node joins and one is excluded by the stock label: one declarative call, same address.
	updated := []*corev1.Node{nodes[0], nodes[1], node("n3", "10.0.0.3", nil),
		node("n4", "10.0.0.4", map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": "true"})}
	ensures := p.Calls()[reference.OpEnsure]
	if err := lb.UpdateLoadBalancer(ctx(t), cluster, svc, updated); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if n := p.Calls()[reference.OpEnsure] - ensures; n != 1 {
		t.Errorf("UpdateLoadBalancer made %d Ensure calls, want 1", n)
	}
	desired, _ = p.Desired(ref(svc))
	if got := nodeNames(desired); got != "n1,n2,n3" {
		t.Errorf("desired nodes after update = %s, want n1,n2,n3", got)
	}
	after, _, _ := lb.GetLoadBalancer(ctx(t), cluster, svc)
	if !equality.Semantic.DeepEqual(after, st) {
		t.Errorf("status after update = %+v, want unchanged %+v", after, st)
	}

	if err := lb.EnsureLoadBalancerDeleted(ctx(t), cluster, svc); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	if _, exists, err := lb.GetLoadBalancer(ctx(t), cluster, svc); err != nil || exists {
		t.Errorf("GetLoadBalancer after delete = exists %v, err %v; want false, nil", exists, err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx(t), cluster, svc); err != nil {
		t.Errorf("second EnsureLoadBalancerDeleted: %v, want nil (already gone)", err)
	}
	if refs := p.Refs(); len(refs) != 0 {
		t.Errorf("provider still holds %v", refs)
	}
	if !equality.Semantic.DeepEqual(svc, svcBefore) {
		t.Error("the Service was modified")
	}
}

func TestUpdateOfMissingLoadBalancerCreatesNothing(t *testing.T) {
	lb, p := newBalancer(t)
	svc := lbService("gone")
	if err := lb.UpdateLoadBalancer(ctx(t), cluster, svc, []*corev1.Node{node("n1", "10.0.0.1", nil)}); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if n := p.Calls()[reference.OpEnsure]; n != 0 {
		t.Errorf("Ensure called %d times, want 0", n)
	}
	if refs := p.Refs(); len(refs) != 0 {
		t.Errorf("provider holds %v, want nothing", refs)
	}
}

func TestInvalidServiceListsEveryProblemWithoutProviderCall(t *testing.T) {
	lb, p := newBalancer(t)
	svc := lbService("bad", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portico-lb.io/internal": "yes"}
		s.Spec.LoadBalancerSourceRanges = []string{"not-a-cidr"}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP // the provider cannot express it
	})
	before := svc.DeepCopy()

	_, err := lb.EnsureLoadBalancer(ctx(t), cluster, svc, []*corev1.Node{node("n1", "10.0.0.1", nil)})
	var invalid *ccm.InvalidServiceError
	if !errors.As(err, &invalid) {
		t.Fatalf("EnsureLoadBalancer error = %v, want *ccm.InvalidServiceError", err)
	}
	for _, want := range []string{"ns/bad", "metadata.annotations[portico-lb.io/internal]", `"yes"`, "spec.loadBalancerSourceRanges[0]", "spec.sessionAffinity"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if len(invalid.Errs) != 3 {
		t.Errorf("got %d problems, want 3: %v", len(invalid.Errs), invalid.Errs)
	}
	if n := p.Calls()[reference.OpEnsure]; n != 0 {
		t.Errorf("Ensure called %d times for an invalid Service, want 0", n)
	}
	if !equality.Semantic.DeepEqual(svc, before) {
		t.Error("EnsureLoadBalancer modified the Service")
	}

	// A Service that became invalid after it got a load balancer: a node update reports the
	// problems and leaves the load balancer as it is.
	good := lbService("bad")
	if _, err := lb.EnsureLoadBalancer(ctx(t), cluster, good, []*corev1.Node{node("n1", "10.0.0.1", nil)}); err != nil {
		t.Fatalf("EnsureLoadBalancer(valid): %v", err)
	}
	ensures := p.Calls()[reference.OpEnsure]
	err = lb.UpdateLoadBalancer(ctx(t), cluster, svc, []*corev1.Node{node("n1", "10.0.0.1", nil), node("n2", "10.0.0.2", nil)})
	if !errors.As(err, &invalid) {
		t.Fatalf("UpdateLoadBalancer error = %v, want *ccm.InvalidServiceError", err)
	}
	if n := p.Calls()[reference.OpEnsure] - ensures; n != 0 {
		t.Errorf("UpdateLoadBalancer of an invalid Service made %d Ensure calls, want 0", n)
	}
	if desired, _ := p.Desired(ref(good)); nodeNames(desired) != "n1" {
		t.Errorf("desired nodes = %s, want n1 (untouched)", nodeNames(desired))
	}
}

func TestProviderErrors(t *testing.T) {
	lb, p := newBalancer(t)
	svc := lbService("web")
	nodes := []*corev1.Node{node("n1", "10.0.0.1", nil)}

	// RetryError becomes the stock controller's fixed-delay RetryError.
	p.FailNext(reference.OpEnsure, providers.RetryAfter(15*time.Second, "load balancer is provisioning"))
	_, err := lb.EnsureLoadBalancer(ctx(t), cluster, svc, nodes)
	var retry *api.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("EnsureLoadBalancer error = %v (%T), want *api.RetryError", err, err)
	}
	if retry.RetryAfter() != 15*time.Second {
		t.Errorf("RetryAfter = %s, want 15s", retry.RetryAfter())
	}
	if !strings.Contains(retry.Error(), "load balancer is provisioning") || !strings.Contains(retry.Error(), "ns/web") {
		t.Errorf("RetryError message %q lacks the reason or the Service", retry.Error())
	}
	// The stock controller wraps with %w before it looks: it must still find it.
	if !errors.As(errors.Join(errors.New("failed to ensure load balancer"), err), &retry) {
		t.Error("a wrapped RetryError is not found by errors.As")
	}

	// Any other error keeps its chain, for backoff.
	boom := errors.New("cloud API unavailable")
	p.FailNext(reference.OpEnsure, boom)
	_, err = lb.EnsureLoadBalancer(ctx(t), cluster, svc, nodes)
	if !errors.Is(err, boom) || errors.As(err, &retry) {
		t.Errorf("EnsureLoadBalancer error = %v, want it to wrap %v and not be a RetryError", err, boom)
	}

	// The provider rejecting the model (terminal for Portico) reaches the controller wrapped.
	p.FailNext(reference.OpEnsure, providers.Invalid("spec.loadBalancerIP", "address in use"))
	_, err = lb.EnsureLoadBalancer(ctx(t), cluster, svc, nodes)
	if !providers.IsInvalid(err) || !strings.Contains(err.Error(), "spec.loadBalancerIP") {
		t.Errorf("EnsureLoadBalancer error = %v, want the provider's InvalidError", err)
	}

	// Get failing for another reason than ErrNotFound is an error, not "does not exist".
	p.FailNext(reference.OpGet, boom)
	if _, exists, err := lb.GetLoadBalancer(ctx(t), cluster, svc); !errors.Is(err, boom) || exists {
		t.Errorf("GetLoadBalancer = exists %v, err %v; want false and %v", exists, err, boom)
	}

	// Delete errors are wrapped too.
	p.FailNext(reference.OpDelete, boom)
	if err := lb.EnsureLoadBalancerDeleted(ctx(t), cluster, svc); !errors.Is(err, boom) {
		t.Errorf("EnsureLoadBalancerDeleted error = %v, want %v", err, boom)
	}
}

func nodeNames(lb *providers.LoadBalancer) string {
	if lb == nil {
		return ""
	}
	names := make([]string, len(lb.Nodes))
	for i, n := range lb.Nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ",")
}
