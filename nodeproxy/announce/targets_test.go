package announce

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

func TestTargets(t *testing.T) {
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey})
	pools := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	proxy := corev1.LoadBalancerIPModeProxy
	add := func(idx cache.Indexer, obj any) {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	lb := func(name string, policy corev1.ServiceExternalTrafficPolicy, ing ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ing}}}
	}
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.AddressPoolSpec{Addresses: []string{"198.18.10.0/24", "fd00:c613:ff01::/120"}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		t.Fatal(err)
	}
	add(pools, &unstructured.Unstructured{Object: u})
	// Two Services share 198.18.10.1, one of them Local with a ready endpoint on node2 and an
	// unready one on node3.
	add(svcs, lb("a", corev1.ServiceExternalTrafficPolicyCluster, corev1.LoadBalancerIngress{IP: "198.18.10.1"}, corev1.LoadBalancerIngress{IP: "fd00:c613:ff01::1"}))
	add(svcs, lb("b", corev1.ServiceExternalTrafficPolicyLocal, corev1.LoadBalancerIngress{IP: "198.18.10.1"}))
	no, n2, n3 := false, "node2", "node3"
	add(slices, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b-1", Labels: map[string]string{discoveryv1.LabelServiceName: "b"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.19.2.1"}, NodeName: &n2},
			{Addresses: []string{"198.19.3.1"}, NodeName: &n3, Conditions: discoveryv1.EndpointConditions{Ready: &no}}}})
	// Skipped: ipMode Proxy, an address of no pool, a ClusterIP Service.
	add(svcs, lb("proxy", corev1.ServiceExternalTrafficPolicyCluster, corev1.LoadBalancerIngress{IP: "198.18.10.2", IPMode: &proxy}))
	add(svcs, lb("other", corev1.ServiceExternalTrafficPolicyCluster, corev1.LoadBalancerIngress{IP: "198.18.99.1"}))
	add(svcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cip"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.18.10.3"}}}}})

	st, err := tracker.NewState(tracker.NewCacheStore("node1", svcs, slices, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})).WithPools(pools), "node1", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Targets(st, Classes{Classless: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("targets = %+v, want 198.18.10.1 and fd00:c613:ff01::1", got)
	}
	v4, v6 := got[0], got[1]
	if v4.VIP.String() != "198.18.10.1" || len(v4.Services) != 2 || v4.Pool == nil || v4.Pool.Name != "p" || !v4.LocalOnly ||
		len(v4.WithEndpoints) != 1 || !v4.WithEndpoints["node2"] {
		t.Errorf("shared VIP: %+v, want services a and b, pool p, Local with node2 only", v4)
	}
	if v6.VIP.String() != "fd00:c613:ff01::1" || len(v6.Services) != 1 || v6.LocalOnly {
		t.Errorf("IPv6 VIP: %+v", v6)
	}
}

// TestTargetsOnlyPorticoClasses (issue 31, item 5): a pool address in the status of a Service
// of a class Portico does not serve (another implementation's, or written by anyone with
// services/status) is not a target; the same address held by a Service of a configured class,
// or class-less when class-less Services are Portico's, is. On 3e563f2 Targets announced every
// LoadBalancer Service's pool address, whatever its class.
func TestTargetsOnlyPorticoClasses(t *testing.T) {
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey})
	pools := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.AddressPoolSpec{Addresses: []string{"198.18.10.0/24"}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		t.Fatal(err)
	}
	if err := pools.Add(&unstructured.Unstructured{Object: u}); err != nil {
		t.Fatal(err)
	}
	lb := func(name string, class *string, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}}}
	}
	mine, theirs := "portico-lb.io/baremetal", "metallb.io/other"
	for _, s := range []*corev1.Service{
		lb("mine", &mine, "198.18.10.1"),
		lb("classless", nil, "198.18.10.2"),
		lb("forged", &theirs, "198.18.10.3"),
		lb("shares-with-forged", &theirs, "198.18.10.1"), // does not add itself to mine's target
	} {
		if err := svcs.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	st, err := tracker.NewState(tracker.NewCacheStore("node1", svcs, slices, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})).WithPools(pools), "node1", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		classes Classes
		want    []string
	}{
		{"class and class-less", Classes{Names: []string{mine}, Classless: true}, []string{"198.18.10.1 [ns/mine]", "198.18.10.2 [ns/classless]"}},
		{"class only", Classes{Names: []string{mine}}, []string{"198.18.10.1 [ns/mine]"}},
		{"class-less only (the default)", Classes{Classless: true}, []string{"198.18.10.2 [ns/classless]"}},
		{"nothing configured", Classes{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Targets(st, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			var desc []string
			for _, tg := range got {
				desc = append(desc, fmt.Sprintf("%s %v", tg.VIP, tg.Services))
			}
			if fmt.Sprint(desc) != fmt.Sprint(tc.want) {
				t.Errorf("targets %v, want %v", desc, tc.want)
			}
		})
	}
}
