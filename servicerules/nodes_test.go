package servicerules

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeExternalIP, Address: "198.18.200.1"},
			{Type: corev1.NodeInternalIP, Address: "198.19.0.10"},
		}},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func TestNodeBeingDeleted(t *testing.T) {
	if NodeBeingDeleted(&corev1.Node{}) {
		t.Error("a plain node is not being deleted")
	}
	tainted := node("t", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	})
	excluded := node("x", func(n *corev1.Node) { n.Labels = map[string]string{ExcludeFromLBLabel: "true"} })
	if !NodeBeingDeleted(&tainted) || NodeBeingDeleted(&excluded) {
		t.Errorf("tainted: %v (want true), excluded: %v (want false: excluded is not deleted)", NodeBeingDeleted(&tainted), NodeBeingDeleted(&excluded))
	}
}

func TestNodeEligible(t *testing.T) {
	cases := []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"plain", node("a"), true},
		{"excluded", node("b", func(n *corev1.Node) { n.Labels = map[string]string{ExcludeFromLBLabel: ""} }), false},
		{"exclude label false", node("c", func(n *corev1.Node) { n.Labels = map[string]string{ExcludeFromLBLabel: "false"} }), true},
		{"deleting", node("d", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{} }), false},
		{"autoscaler taint", node("e", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint}} }), false},
	}
	for _, c := range cases {
		if got := NodeEligible(&c.node); got != c.want {
			t.Errorf("%s: NodeEligible = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNodeAddresses(t *testing.T) {
	n := node("a")
	if got := NodeAddresses(&n); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.19.0.10")}) {
		t.Errorf("InternalIP first: got %v", got)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.18.200.1"}, {Type: corev1.NodeInternalIP, Address: "junk"}}
	if got := NodeAddresses(&n); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.18.200.1")}) {
		t.Errorf("ExternalIP without a valid InternalIP: got %v", got)
	}
}
