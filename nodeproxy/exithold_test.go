package nodeproxy

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// TestExitHold: the agent asks for a restart hold only when it was told to stop, runs
// membership, and its Node is neither cordoned nor being deleted.
func TestExitHold(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		node       *corev1.Node // nil: no Node
		membership bool
		signalled  bool
		want       time.Duration
	}{
		{"SIGTERM", &corev1.Node{}, true, true, 7 * time.Second},
		{"own failure", &corev1.Node{}, true, false, 0},
		{"no membership", &corev1.Node{}, false, true, 0},
		{"no Node", nil, true, true, 0},
		{"cordoned", &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, true, true, 0},
		{"being deleted", &corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"x"}}}, true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kubefake.NewClientset()
			if tc.node != nil {
				tc.node.Name = "n1"
				cs = kubefake.NewClientset(tc.node)
			}
			tr, err := tracker.New(cs, "n1", func() {}, tracker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			tr.Start(stop)
			if !tr.WaitForSync(stop) {
				t.Fatal("caches did not sync")
			}
			cfg := config.DefaultAgent()
			cfg.Membership.Enabled = tc.membership
			cfg.Membership.RestartHold = 7 * time.Second
			a := &agent{cfg: cfg, tracker: tr}
			if got := a.exitHoldFor(tc.signalled); got != tc.want {
				t.Errorf("exitHoldFor(%v) = %v, want %v", tc.signalled, got, tc.want)
			}
		})
	}
}
