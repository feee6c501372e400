package dataplane_test

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestDeployManifestIsSufficient applies deploy/agent.yaml (RBAC for real, the DaemonSet as a
// server-side dry run, which also checks its fields) and runs an agent with the
// ServiceAccount's own token and the DaemonSet's flags, in each proxy mode (the DaemonSet sets
// none: the default; the other is one flag away), on node4 (iptables) or node3 (nftables): it
// must serve a NodePort and write its Warning Event, and nothing it asks the apiserver for may
// be forbidden.
func TestDeployManifestIsSufficient(t *testing.T) { forModes(t, testDeployManifestIsSufficient) }

func testDeployManifestIsSufficient(t *testing.T) {
	e := newEnv(t)
	if err := shared.cluster.Apply(e.ctx, "../../../deploy/agent.yaml", "DaemonSet"); err != nil {
		t.Fatal(err)
	}
	tok, err := e.cs.CoreV1().ServiceAccounts("kube-system").CreateToken(e.ctx, "portico-agent",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := shared.cluster.WriteKubeconfigWithToken(kubeconfig, shared.cluster.Host(), tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	node := shared.lab.Nodes()[3]
	if e.mode == modeNFTables {
		node = shared.lab.Nodes()[2]
	}
	// Something on the node holds the health check port the Service will get, so the agent has an
	// Event to write.
	// The port must be free on the node and not allocated by the API server to another
	// Service (another test's healthCheckNodePort or NodePort).
	existing, err := e.cs.CoreV1().Services("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[int32]bool{}
	for _, s := range existing.Items {
		allocated[s.Spec.HealthCheckNodePort] = true
		for _, p := range s.Spec.Ports {
			allocated[p.NodePort] = true
		}
	}
	var hold net.Listener
	var hc int32
	for port := int32(32600); port < 32700 && hold == nil; port++ {
		if allocated[port] {
			continue
		}
		if l, err := node.Listen(e.ctx, "tcp", fmt.Sprintf(":%d", port)); err == nil {
			hold, hc = l, port
		}
	}
	if hold == nil {
		t.Fatalf("no free port in 32600-32699 on %s", node.Name)
	}
	defer hold.Close()

	p := e.ownAgent(node, "--kubeconfig="+kubeconfig, "--hostname-override="+node.Name,
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=127.0.0.1:10249", "-v=1",
		"--proxy-mode="+e.mode)

	e.backend(e.node1, "a", "deploy")
	svc := e.service("deploy", "deploy", loadBalancer, local, func(s *corev1.Service) {
		s.Spec.HealthCheckNodePort = hc
		s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	})
	np := svc.Spec.Ports[0].NodePort
	// externalTrafficPolicy: Local with the endpoint on node1: the agent's node drops its
	// NodePort, node1's serves it. A NodePort Service checks that the agent's node forwards.
	plain := e.service("deploy-cluster", "deploy", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	e.reach(e.client, "tcp", addrPort(node.Addr, plain.Spec.Ports[0].NodePort))
	e.wantDropped(e.client, addrPort(node.Addr, np), node.Name+"'s Local NodePort without a local endpoint")
	e.eventually("the agent's FailedToStartServiceHealthcheck Event", 60*time.Second, func() error {
		list, err := e.cs.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == "FailedToStartServiceHealthcheck" && ev.Regarding.Name == "deploy" && strings.Contains(ev.Note, node.Name) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none from %s", len(list.Items), node.Name)
	})
	if out := p.Output(); strings.Contains(strings.ToLower(out), "forbidden") {
		t.Errorf("the agent was refused something with the manifest's RBAC:\n%s", tail(out))
	}
}
