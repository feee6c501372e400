package dataplane_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// Behaviour the upstream Kubernetes e2e Service specs expect of a proxy, which Portico's own
// tests had missed.

// TestTerminatingEndpointTheSliceCallsReadyIsServed: a Service with publishNotReadyAddresses
// keeps a terminating pod's endpoint ready in its EndpointSlice (ready: true, serving: false,
// terminating: true); a proxy routes on ready as given, so the pod stays reachable ("should be
// able to connect to terminating and unready endpoints if PublishNotReadyAddresses is true").
func TestTerminatingEndpointTheSliceCallsReadyIsServed(t *testing.T) {
	forModes(t, testTerminatingEndpointTheSliceCallsReadyIsServed)
}

func testTerminatingEndpointTheSliceCallsReadyIsServed(t *testing.T) {
	e := newEnv(t)
	backend := e.pod(e.node2, "leaving")
	backend.StartEchoServer(t, "tcp", 8080)
	svc := e.service("leaving", "", func(s *corev1.Service) {
		s.Spec.Selector = nil
		s.Spec.PublishNotReadyAddresses = true
	})
	e.handMadeSlice("leaving", backend, e.node2, discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(false), Terminating: ptr(true)})
	pod := e.pod(e.node1, "client")
	if r := e.reach(&pod.Host, "tcp", addrPort(clusterIP(svc), 80)); r.Server != backend.Name {
		t.Errorf("answered by %q, want %q", r.Server, backend.Name)
	}
}

// TestServiceOfAnotherProxyLeftAlone: a Service labelled service.kubernetes.io/service-proxy-name
// belongs to the proxy it names; portico-agent, like kube-proxy, programs nothing for it, and
// serves it once the label is removed ("should implement service.kubernetes.io/service-proxy-name").
func TestServiceOfAnotherProxyLeftAlone(t *testing.T) {
	forModes(t, testServiceOfAnotherProxyLeftAlone)
}

func testServiceOfAnotherProxyLeftAlone(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "other", "other")
	other := e.service("other", "other", func(s *corev1.Service) {
		s.Labels = map[string]string{tracker.LabelServiceProxyName: "another-proxy"}
	})
	// A Service created afterwards: once it answers, the agents have seen the other one.
	e.backend(e.node2, "marker", "marker")
	marker := e.service("marker", "marker")
	pod := e.pod(e.node1, "client")
	e.reach(&pod.Host, "tcp", addrPort(clusterIP(marker), 80))
	for _, n := range []*netlab.Node{e.node1, e.node2} {
		dump := []string{"iptables-save"}
		if e.mode == modeNFTables {
			dump = []string{"nft", "list", "table", "ip", "portico"}
		}
		out, err := n.Exec(e.ctx, dump[0], dump[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if ip := other.Spec.ClusterIP; strings.Contains(string(out), ip) {
			t.Errorf("%s on %s has a rule for %s, the ClusterIP of a Service another proxy serves", dump[0], n.Name, ip)
		}
	}
	if r, err := e.request(&pod.Host, "tcp", addrPort(clusterIP(other), 80)); err == nil {
		t.Errorf("the Service of another proxy answered (by %q)", r.Server)
	}

	cur, err := e.cs.CoreV1().Services(e.ns).Get(e.ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cur.Labels, tracker.LabelServiceProxyName)
	if _, err := e.cs.CoreV1().Services(e.ns).Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(fmt.Sprintf("the unlabelled Service %s answering", other.Name), 30*time.Second, func() error {
		_, err := e.request(&pod.Host, "tcp", addrPort(clusterIP(other), 80))
		return err
	})
}
