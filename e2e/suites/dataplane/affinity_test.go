package dataplane_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// TestSessionAffinityTimeout: sessionAffinityConfig.clientIP.timeoutSeconds bounds the
// stickiness: within it a client keeps its endpoint, after it idles longer its next connection
// is balanced again (over three endpoints, ten fresh choices all landing on one endpoint happen
// once in 3^9).
func TestSessionAffinityTimeout(t *testing.T) {
	forModes(t, testSessionAffinityTimeout)
}

func testSessionAffinityTimeout(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.backend(e.node2, n, "expiring")
	}
	svc := e.service("expiring", "expiring", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](1)}}
	})
	dst := addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort)
	e.waitEndpoints("expiring", 3)
	first := e.reach(e.client, "tcp", dst).Server
	for i := range 3 {
		if r, err := e.request(e.client, "tcp", dst); err != nil || r.Server != first {
			t.Fatalf("request %d within the timeout: %v %v, want %s", i, r.Server, err, first)
		}
	}
	seen := map[string]bool{first: true}
	for range 10 {
		time.Sleep(1500 * time.Millisecond) // longer than the timeout
		r, err := e.request(e.client, "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Server] = true
	}
	if len(seen) < 2 {
		t.Errorf("after idling past the 1 s timeout, every connection still went to %v", seen)
	}
}

// waitEndpoints waits until the EndpointSlices of svc list n ready endpoints, and one sync.
func (e *env) waitEndpoints(svc string, n int) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%d endpoints of %s", n, svc), 30*time.Second, func() error {
		ready, err := e.countEndpoints(svc, func(discoveryv1.Endpoint) bool { return true })
		if err == nil && ready != n {
			err = fmt.Errorf("%d ready endpoints", ready)
		}
		return err
	})
	e.waitSynced()
}

// waitSynced waits until the shared agents have applied everything they had been told by
// now: each reports a successful sync that ended after this call began and after the last
// change it queued (the agent's sync_proxy_rules_last_*timestamp_seconds metrics, as
// kube-proxy's).
func (e *env) waitSynced() {
	e.t.Helper()
	since := float64(time.Now().UnixNano()) / 1e9
	for _, n := range []*netlab.Node{e.node1, e.node2} {
		e.eventually(n.Name+"'s agent synced", 30*time.Second, func() error {
			synced, err := e.metric(n, "portico_agent_sync_proxy_rules_last_timestamp_seconds")
			if err != nil {
				return err
			}
			queued, err := e.metric(n, "portico_agent_sync_proxy_rules_last_queued_timestamp_seconds")
			if err != nil {
				return err
			}
			if synced < since || synced < queued {
				return fmt.Errorf("last sync at %.3f, last change queued at %.3f, waiting since %.3f", synced, queued, since)
			}
			return nil
		})
	}
}

// countEndpoints counts the ready endpoints of svc's EndpointSlices that match.
func (e *env) countEndpoints(svc string, match func(discoveryv1.Endpoint) bool) (int, error) {
	list, err := e.cs.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && match(ep) {
				n++
			}
		}
	}
	return n, nil
}

// TestLoadBalancerIPModeProxy: an ingress IP with ipMode Proxy is delivered by the load
// balancer to the nodes (KEP-1860), so the agent installs nothing for it, while the Service's
// ipMode VIP address works.
func TestLoadBalancerIPModeProxy(t *testing.T) { forModes(t, testLoadBalancerIPModeProxy) }

func testLoadBalancerIPModeProxy(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "ipmode")
	svc := e.service("ipmode", "ipmode", loadBalancer)
	vip, proxied := netip.MustParseAddr("198.18.128.21"), netip.MustParseAddr("198.18.128.22")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
		{IP: vip.String(), IPMode: ptr(corev1.LoadBalancerIPModeVIP)},
		{IP: proxied.String(), IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
	}
	if _, err := e.cs.CoreV1().Services(e.ns).UpdateStatus(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.route(e.client, vip, e.node1)
	e.route(e.client, proxied, e.node1)
	e.reach(e.client, "tcp", addrPort(vip, 80))
	for range 3 {
		if r, err := e.request(e.client, "tcp", addrPort(proxied, 80)); err == nil {
			t.Fatalf("the ipMode Proxy address was served (by %s): the agent must leave it to the load balancer", r.Server)
		}
	}
}
