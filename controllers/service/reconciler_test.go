package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/providers"
)

func TestOwnership(t *testing.T) {
	o := Ownership{Classes: map[string]string{"portico-lb.io/aws": "aws"}}
	lb := func(class *string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
	}
	cases := []struct {
		svc  *corev1.Service
		o    Ownership
		want string
		ok   bool
	}{
		{lb(ptr.To("portico-lb.io/aws"), corev1.ServiceTypeLoadBalancer), o, "aws", true},
		{lb(ptr.To("other"), corev1.ServiceTypeLoadBalancer), o, "", false},
		{lb(nil, corev1.ServiceTypeLoadBalancer), o, "", false},
		{lb(nil, corev1.ServiceTypeLoadBalancer), Ownership{Classless: "ref"}, "ref", true},
		{lb(nil, corev1.ServiceTypeClusterIP), Ownership{Classless: "ref"}, "", false},
	}
	for i, c := range cases {
		p, ok := c.o.ProviderFor(c.svc)
		if p != c.want || ok != c.ok {
			t.Errorf("case %d: got %q,%v want %q,%v", i, p, ok, c.want, c.ok)
		}
	}
}

func TestModelHashTracksChanges(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}},
	}
	node := func(name string) corev1.Node { return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	caps := providers.Capabilities{}
	a, _ := servicemodel.BuildLoadBalancer(svc, []corev1.Node{node("n1")}, caps, nil)
	b, _ := servicemodel.BuildLoadBalancer(svc, []corev1.Node{node("n1")}, caps, nil)
	c, _ := servicemodel.BuildLoadBalancer(svc, []corev1.Node{node("n1"), node("n2")}, caps, nil)
	if a == nil || c == nil {
		t.Fatal("model not built")
	}
	if modelHash(a) != modelHash(b) {
		t.Error("equal models hash differently")
	}
	if modelHash(a) == modelHash(c) {
		t.Error("a node change does not change the hash")
	}
}
