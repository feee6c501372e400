package announceonly

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/announce/election"
)

// TestAnnounceBesideKubeProxy (issue 29): portico-agent --proxy-mode=none announces the VIPs
// beside kube-proxy in both of its modes, on kube-proxy's nodes, and leaves every Service rule
// and healthCheckNodePort to it. On d6507e1 the agent refuses --proxy-mode=none (an unknown
// mode) and cannot run beside kube-proxy at all: its defaults take kube-proxy's ports and it
// programs every Service a second time.
func TestAnnounceBesideKubeProxy(t *testing.T) {
	setup(t)
	backends(t)
	for i, mode := range kubeProxyModes {
		t.Run("kube-proxy "+mode, func(t *testing.T) {
			// The first node ran the agent with a dataplane before (agent.mode switched to
			// none): its rules stay in the kernel when it stops, until the announce-only agent
			// removes them at start.
			first := shared.Lab.Nodes()[0]
			leftover(t, first, mode)
			for _, n := range shared.Lab.Nodes() {
				startKubeProxy(t, n, mode)
			}
			// The others run without CAP_NET_ADMIN: announcing needs none.
			for i, n := range shared.Lab.Nodes() {
				startAnnouncer(t, n, i == 0)
			}
			h := services.Helper{TB: t, CS: shared.CS, Namespace: namespace, Timeout: time.Minute}
			nodes := nodeObjects(t)

			// externalTrafficPolicy: Cluster: the first node of the VIP's election order
			// answers ARP, any pod serves.
			vip := netip.MustParseAddr(fmt.Sprintf("198.18.222.%d", 2+2*i))
			order := election.Candidates(election.Input{VIP: vip, Nodes: nodes})
			createService(h, "cluster-"+mode, vip, "web", corev1.ServiceExternalTrafficPolicyCluster)
			served(t, vip)
			arpingOnly(t, vip, order[0])
			t.Logf("%s: %s announced by %s (election order %v) and served", mode, vip, order[0], order)

			// externalTrafficPolicy: Local, the only endpoint on the node last in the VIP's
			// order: that node announces, its pod serves, and the healthCheckNodePort is
			// kube-proxy's (200 there, 503 elsewhere; no agent tried to open it).
			local := netip.MustParseAddr(fmt.Sprintf("198.18.222.%d", 3+2*i))
			order = election.Candidates(election.Input{VIP: local, Nodes: nodes})
			last := nodeByName(order[len(order)-1])
			app := "local-" + mode
			p := readyPod(t, last, app, app)
			p.StartEchoServer(t, "tcp", echoPort)
			svc := createService(h, app, local, app, corev1.ServiceExternalTrafficPolicyLocal)
			served(t, local, app)
			arpingOnly(t, local, last.Name)
			t.Logf("%s: externalTrafficPolicy: Local %s announced by %s, the endpoint's node (election order %v)", mode, local, last.Name, order)
			hc := uint16(svc.Spec.HealthCheckNodePort)
			for _, n := range shared.Lab.Nodes() {
				want := http.StatusServiceUnavailable
				if n == last {
					want = http.StatusOK
				}
				wait.For(t, time.Minute, fmt.Sprintf("healthCheckNodePort %d on %s answering %d", hc, n.Name, want), func() error {
					got, err := healthCheck(netip.AddrPortFrom(n.Addr, hc))
					if err == nil && got != want {
						err = fmt.Errorf("status %d", got)
					}
					return err
				})
			}
			events, err := services.Events(context.Background(), shared.CS, namespace, app)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				if e.Reason == "FailedToStartServiceHealthcheck" {
					t.Errorf("%s: %s", e.Reason, e.Message)
				}
			}

			// Every translation above was kube-proxy's: no node holds Portico's rules (the
			// first node's leftovers were removed by its announce-only agent).
			for _, n := range shared.Lab.Nodes() {
				if found := porticoRules(t, n); len(found) > 0 {
					t.Errorf("%s holds Portico's rules beside kube-proxy's: %v", n.Name, found)
				}
				if err := kubeProxyRules(n, mode); err != nil {
					t.Errorf("%s: kube-proxy's rules: %v", n.Name, err)
				}
			}
		})
	}
}

// TestDataplaneRefusedBesideKubeProxy (issue 29): an agent with a dataplane on a node where
// kube-proxy runs (in either mode) exits at once with the startup code, naming what it found
// and the settings to change, before it touches the node's rules; --ignore-other-proxy (a
// switch's overlap) starts it anyway. Its ports are moved off kube-proxy's, so that the
// rules, not the ports, are what it finds. On d6507e1 it starts and programs the Services
// beside kube-proxy's.
func TestDataplaneRefusedBesideKubeProxy(t *testing.T) {
	setup(t)
	n := shared.Lab.Nodes()[0]
	want := map[string]string{"nftables": "nftables table ip kube-proxy", "iptables": "chain KUBE-SERVICES"}
	for _, mode := range kubeProxyModes {
		t.Run("kube-proxy "+mode, func(t *testing.T) {
			startKubeProxy(t, n, mode)
			ports := []string{"--healthz-bind-address=0.0.0.0:10276", "--metrics-bind-address=127.0.0.1:10279"}
			for _, agentMode := range []string{"nftables", "iptables"} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				out, err := n.Exec(ctx, shared.Agent, append(append(agentBase(n), ports...), "--proxy-mode="+agentMode)...)
				cancel()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != config.ExitStartup {
					t.Errorf("--proxy-mode=%s beside kube-proxy %s: %v, want exit code %d\n%s", agentMode, mode, err, config.ExitStartup, tail(string(out)))
				}
				for _, w := range []string{want[mode], "kube-proxy", "--proxy-mode=none", "agent.mode=none", "--ignore-other-proxy"} {
					if !strings.Contains(string(out), w) {
						t.Errorf("--proxy-mode=%s beside kube-proxy %s: output lacks %q:\n%s", agentMode, mode, w, tail(string(out)))
					}
				}
				if found := porticoRules(t, n); len(found) > 0 {
					t.Errorf("the refused agent left rules: %v", found)
				}
			}
			p, err := n.Start(shared.Agent, append(append(agentBase(n), ports...), "--proxy-mode=nftables", "--ignore-other-proxy")...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.WaitFor(ctx, `"Synced"`); err != nil {
				t.Errorf("--ignore-other-proxy: %v\n%s", err, tail(p.Output()))
			}
			_ = p.Stop()
			if out, err := n.Exec(ctx, shared.Agent, "--cleanup", "--proxy-mode=nftables"); err != nil {
				t.Errorf("portico-agent --cleanup: %v\n%s", err, out)
			}
		})
	}
}

// leftover runs portico-agent with the dataplane of mode on n until its first sync, then
// stops it (SIGTERM: a restart, the rules stay) and checks that its rules are in the kernel.
func leftover(t *testing.T, n *netlab.Node, mode string) {
	t.Helper()
	p, err := n.Start(shared.Agent, append(agentBase(n), "--proxy-mode="+mode,
		"--healthz-bind-address=0.0.0.0:10276", "--metrics-bind-address=127.0.0.1:10279")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.WaitFor(ctx, `"Synced"`)
	_ = p.Stop()
	if err != nil {
		t.Fatalf("portico-agent --proxy-mode=%s on %s: %v\n%s", mode, n.Name, err, tail(p.Output()))
	}
	if len(porticoRules(t, n)) == 0 {
		t.Fatalf("portico-agent --proxy-mode=%s left no rules on %s to remove", mode, n.Name)
	}
}

// createService creates the LoadBalancer Service name asking for vip, selecting app=app with
// policy, and waits for the controller to report vip.
func createService(h services.Helper, name string, vip netip.Addr, app string, policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	svc := services.LoadBalancer(namespace, name, func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = vip.String()
		s.Spec.Selector = map[string]string{"app": app}
		s.Spec.ExternalTrafficPolicy = policy
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: echoPort, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP}}
	})
	h.CreateTemp(svc)
	return h.Wait(name, "ingress "+vip.String(), services.HasIngressIPs(vip))
}

// healthCheck asks addr (a healthCheckNodePort) from the client and returns the HTTP status.
func healthCheck(addr netip.AddrPort) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := shared.Lab.Clients()[0].DialTCP(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func nodeByName(name string) *netlab.Node {
	for _, n := range shared.Lab.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}
