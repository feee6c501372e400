package metallb

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// svc is a LoadBalancer Service created at minute age that MetalLB served with ips.
func svc(name string, age int, ann map[string]string, port int32, ips ...string) corev1.Service {
	s := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Annotations: ann,
			CreationTimestamp: metav1.NewTime(time.Unix(0, 0).Add(time.Duration(age) * time.Minute))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: port}}},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		if strings.Contains(ip, ":") {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPv6Protocol)
		} else {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPv4Protocol)
		}
	}
	if len(s.Spec.IPFamilies) > 1 {
		p := corev1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &p
	}
	return s
}

func convertedPools(t *testing.T) []v1alpha1.AddressPool {
	t.Helper()
	res, err := Convert(input(t, `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: a}
spec: {addresses: [198.18.10.0/24, "2001:db8:10::/120"]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: b}
spec: {addresses: [198.18.11.0/24], autoAssign: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	return res.Pools
}

func TestCheckServices(t *testing.T) {
	shared := map[string]string{"metallb.io/allow-shared-ip": "k"}
	cases := []struct {
		name  string
		svcs  []corev1.Service
		class *string
		// lose lists the Services (namespace/name) that would not keep their addresses.
		lose []string
	}{
		{name: "auto-assigned, first address (.0) and out of order", svcs: []corev1.Service{
			svc("x", 1, nil, 80, "198.18.10.0"), svc("y", 2, nil, 80, "198.18.10.7"), svc("z", 3, nil, 80, "198.18.10.255"),
		}},
		{name: "pinned by MetalLB's annotations", svcs: []corev1.Service{
			svc("new", 1, map[string]string{"metallb.io/loadBalancerIPs": "198.18.10.9"}, 80, "198.18.10.9"),
			svc("legacy", 2, map[string]string{"metallb.universe.tf/loadBalancerIPs": "198.18.10.10"}, 80, "198.18.10.10"),
		}},
		{name: "non-auto-assign pool named by MetalLB's annotation", svcs: []corev1.Service{
			svc("x", 1, map[string]string{"metallb.io/address-pool": "b"}, 80, "198.18.11.3"),
		}},
		{name: "shared with MetalLB's key", svcs: []corev1.Service{
			svc("x", 1, shared, 80, "198.18.10.5"), svc("y", 2, shared, 443, "198.18.10.5"),
		}},
		{name: "shared without a key loses on the younger", svcs: []corev1.Service{
			svc("x", 1, nil, 80, "198.18.10.5"), svc("y", 2, nil, 443, "198.18.10.5"),
		}, lose: []string{"default/y"}},
		{name: "dual stack", svcs: []corev1.Service{
			svc("x", 1, nil, 80, "198.18.10.4", "2001:db8:10::4"),
		}},
		{name: "address outside every converted pool", svcs: []corev1.Service{
			svc("x", 1, nil, 80, "198.18.99.1"),
		}, lose: []string{"default/x"}},
		{name: "pool annotation that no converted pool has", svcs: []corev1.Service{
			svc("x", 1, map[string]string{"metallb.io/address-pool": "gone"}, 80, "198.18.10.5"),
		}, lose: []string{"default/x"}},
		{name: "annotation Portico rejects", svcs: []corev1.Service{
			svc("x", 1, map[string]string{"metallb.io/allow-shared-ip": "a", "portico-lb.io/allow-shared-ip": "b"}, 80, "198.18.10.5"),
		}, lose: []string{"default/x"}},
		{name: "another class is not checked", class: ptr("other"), svcs: []corev1.Service{
			svc("x", 1, nil, 80, "198.18.99.1"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept := CheckServices(convertedPools(t), tc.svcs, tc.class, nil)
			var lose []string
			for _, k := range kept {
				if !k.Keeps() {
					lose = append(lose, k.Service)
					continue
				}
				if strings.Join(k.Portico, ",") != strings.Join(k.Status, ",") {
					t.Errorf("%s keeps %v but status has %v", k.Service, k.Portico, k.Status)
				}
			}
			if strings.Join(lose, " ") != strings.Join(tc.lose, " ") {
				t.Errorf("losing %v, want %v; results %+v", lose, tc.lose, kept)
			}
			if tc.class == nil && len(kept) != len(tc.svcs) {
				t.Errorf("%d results for %d Services", len(kept), len(tc.svcs))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
