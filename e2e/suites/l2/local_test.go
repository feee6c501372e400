package l2

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/nodeproxy/announce/election"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// TestLocalPolicyAnnouncesFromEndpointNode: with externalTrafficPolicy: Local only a node with
// a ready endpoint may announce. The only endpoint is put on the node that comes last in the
// VIP's election order, so any other node would have won without the rule; the client must
// resolve the VIP to that node's MAC, be served by the local pod, and only that node answers.
func TestLocalPolicyAnnouncesFromEndpointNode(t *testing.T) {
	setup(t)
	backends(t)
	vip := netip.MustParseAddr("198.18.220.9")
	order := election.Candidates(election.Input{VIP: vip, Nodes: nodeObjects(t)})
	last := order[len(order)-1]
	node := nodeByName(last)
	p := node.AddPod(t, "local-"+last)
	p.StartEchoServer(t, "tcp", echoPort)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "local-" + last, Namespace: namespace, Labels: map[string]string{"app": "local"}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo"}}
	if _, err := shared.Cluster.CreateReadyPod(context.Background(), pod, last, p.Addr, p.Addr6); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shared.CS.CoreV1().Pods(namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	createService(t, "local", []netip.Addr{vip}, func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": "local"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	t.Logf("VIP %s, election order %v; the endpoint is on %s", vip, order, last)

	h := clientHandle(t)
	pr := probe(vip)
	served := pr.waitServed(time.Now(), settleMax)
	pr.close()
	if !served {
		t.Fatalf("%s not served within %v", vip, settleMax)
	}
	if _, ok := waitNeighbour(h, vip, last, settleMax); !ok {
		t.Fatalf("client's neighbour for %s is %s, want %s (the only node with an endpoint)", vip, nodeOfMAC(netlab.Neighbour(h, vip)), last)
	}
	arpingOnly(t, vip, last, 5*time.Second)
	sent, failed, pods := pr.window(time.Time{}, time.Now())
	t.Logf("%d requests, %d failed before the first success; served by %v", sent, failed, pods)
	if len(pods) != 1 || pods[pod.Name] == 0 {
		t.Errorf("served by %v, want %s only", pods, pod.Name)
	}
}
