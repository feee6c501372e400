//go:build e2e

package tracker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/servicerules"
)

// TestTrackerAgainstAPIServer runs trackers against a real kube-apiserver: with IgnoreExcludeLB
// the nodes labelled exclude-from-external-load-balancers reach the cache without the label
// (without it, with it), and a Service labelled service-proxy-name (another proxy's) never
// reaches the cache while an unlabelled one does.
func TestTrackerAgainstAPIServer(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Client()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{servicerules.ExcludeFromLBLabel: "true"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, labels := range map[string]map[string]string{"mine": nil, "theirs": {LabelServiceProxyName: "another-proxy"}} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ignore := range []bool{false, true} {
		tr, err := New(cs, "labelled", func() {}, Options{AllNodes: true, IgnoreExcludeLB: ignore})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		tr.Start(stop)
		if !tr.WaitForSync(ctx.Done()) {
			close(stop)
			t.Fatal("the tracker's caches did not sync")
		}
		wait.For(t, 30*time.Second, fmt.Sprintf("the Node and the Service in the cache (ignore %v)", ignore), func() error {
			if tr.Store().Node() == nil {
				return errors.New("no Node yet")
			}
			if svc, _, err := tr.Store().Service(types.NamespacedName{Namespace: "default", Name: "mine"}); err != nil || svc == nil {
				return fmt.Errorf("no Service mine yet (%v)", err)
			}
			return nil
		})
		if got := servicerules.NodeEligible(tr.Store().Node()); got != ignore {
			t.Errorf("ignore %v: the labelled node is eligible %v in the cache (labels %v)", ignore, got, tr.Store().Node().Labels)
		}
		if svc, _, err := tr.Store().Service(types.NamespacedName{Namespace: "default", Name: "theirs"}); err != nil || svc != nil {
			t.Errorf("the Service of another proxy is in the cache: %v, %v", svc, err)
		}
		close(stop)
	}
}
