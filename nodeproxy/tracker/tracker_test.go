package tracker

import (
	"testing"
	"time"

	"github.com/portico-lb/portico/servicerules"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestElectionFieldsChanged(t *testing.T) {
	base := func() *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}},
			Status: corev1.NodeStatus{
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.19.0.11"}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			}}
	}
	cases := []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"heartbeat only", func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
			n.ResourceVersion = "2"
		}, false},
		{"label", func(n *corev1.Node) { n.Labels["b"] = "2" }, true},
		{"address", func(n *corev1.Node) { n.Status.Addresses[0].Address = "198.19.0.12" }, true},
		{"taint", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} }, true},
		{"condition status", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, true},
		{"new condition", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
		}, true},
		{"deletion", func(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }, true},
	}
	for _, c := range cases {
		n := base()
		c.mutate(n)
		if got := electionFieldsChanged(base(), n); got != c.want {
			t.Errorf("%s: changed = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestIgnoreExcludeLB: under Options.IgnoreExcludeLB the node informer's transform drops the
// exclude label (and only it), so the node is eligible for every consumer.
func TestIgnoreExcludeLB(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		servicerules.ExcludeFromLBLabel: "true", "zone": "a"}}}
	if servicerules.NodeEligible(n) {
		t.Fatal("a labelled node is eligible before the transform")
	}
	out, err := stripWithoutExcludeLabel(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	if !servicerules.NodeEligible(got) || got.Labels["zone"] != "a" || len(got.Labels) != 1 {
		t.Errorf("after the transform: eligible %v, labels %v", servicerules.NodeEligible(got), got.Labels)
	}
	if other, err := stripWithoutExcludeLabel("not a node"); err != nil || other != "not a node" {
		t.Errorf("a non-Node passed through as %v, %v", other, err)
	}
}
