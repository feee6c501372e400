package operations_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// The addresses a tenant's Service lists in spec.externalIPs: one inside the allow-list of the
// cidrs case, one outside it (both in the range the lab leaves to Services).
var (
	extIPInside  = netip.MustParseAddr("198.18.64.21")
	extIPOutside = netip.MustParseAddr("198.18.65.21")
)

const (
	extIPNamespace = "extip"
	extIPAllowList = "198.18.64.0/24"
)

// TestExternalIPPolicy (issue 31 item 6, CVE-2020-8554): the agents' externalIPs policy decides
// which of a Service's spec.externalIPs get rules, in both proxy modes, and a refusal is told on
// the Service once. On a real control plane and a lab of three nodes (node1's agent in
// nftables mode, given the policy by flags; node2's in iptables mode, given it by its --config
// file, as the chart does; the backend pod on node3), a Service lists two externalIPs, one
// inside 198.18.64.0/24 and one outside. The client routes the ClusterIP and both addresses
// via one agent's node, then the other's, and sends real requests:
//
//   - allow (the default, no setting): both addresses are served, as kube-proxy does; no
//     Event;
//   - deny: the ClusterIP is served, neither address is (no rule mentions them: the packets
//     are not DNATed and the node answers "unreachable"); one Warning Event ExternalIPsRefused
//     names both addresses and the setting, though both agents recorded it;
//   - cidrs with the allow-list 198.18.64.0/24: the inside address is served, the outside one
//     is not; the Event names the outside address and the list;
//   - a bad value: the agent does not start, naming the flag and the accepted values.
//
// On d6507e1 the agent has no such setting: it refuses --external-ip-policy ("unknown flag")
// and the key externalIPs of its --config file, and, started without them, serves every
// externalIP of every Service.
func TestExternalIPPolicy(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables, prereq.NFTables)
	env := extIPEnv(t)
	nodes := env.Lab.Nodes()
	client := env.Lab.Clients()[0]
	ctx := t.Context()
	if err := env.Cluster.EnsureNamespace(ctx, extIPNamespace); err != nil {
		t.Fatal(err)
	}
	backend := nodes[2].AddPod(t, "extip-backend")
	backend.StartEchoServer(t, "tcp", 8080)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: extIPNamespace, Labels: map[string]string{"app": "extip"}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo", Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 8080}}}}
	if _, err := env.Cluster.CreateReadyPod(ctx, pod, nodes[2].Name, backend.Addr); err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	for _, n := range nodes {
		cidrs = append(cidrs, n.PodCIDR.String())
	}

	for _, tc := range []struct {
		name string
		// flags is the setting as node1's agent is given it; file as node2's --config has it.
		flags           []string
		file            string
		served, refused []netip.Addr
		note            []string // in the Event's note, when some are refused
	}{
		{name: "allow", served: []netip.Addr{extIPInside, extIPOutside}},
		{name: "deny", flags: []string{"--external-ip-policy=deny"}, file: "externalIPs: {policy: deny}\n",
			refused: []netip.Addr{extIPInside, extIPOutside},
			note:    []string{extIPInside.String() + ", " + extIPOutside.String(), "externalIPs policy is deny", "--external-ip-policy"}},
		{name: "cidrs", flags: []string{"--external-ip-policy=cidrs", "--external-ip-allowed-cidrs=" + extIPAllowList},
			file:   "externalIPs: {policy: cidrs, allowedCIDRs: [" + extIPAllowList + "]}\n",
			served: []netip.Addr{extIPInside}, refused: []netip.Addr{extIPOutside},
			note: []string{"externalIPs " + extIPOutside.String() + ":", "allow-list " + extIPAllowList, "--external-ip-allowed-cidrs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			common := []string{"--kubeconfig=" + env.Kubeconfig, "--cluster-cidr=" + strings.Join(cidrs, ","),
				"--iptables-min-sync-period=100ms", "--healthz-bind-address=0", "--metrics-bind-address=0", "-v=1"}
			file := filepath.Join(t.TempDir(), "agent.yaml")
			if err := os.WriteFile(file, []byte("apiVersion: config.portico-lb.io/v1alpha1\nkind: AgentConfiguration\nmode: iptables\n"+tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			agents := map[*netlab.Node]*netlab.Process{
				nodes[0]: extIPAgent(t, env, nodes[0], append(append([]string{"--hostname-override=" + nodes[0].Name, "--proxy-mode=nftables"}, common...), tc.flags...)),
				nodes[1]: extIPAgent(t, env, nodes[1], append([]string{"--hostname-override=" + nodes[1].Name, "--config=" + file}, common...)),
			}
			logs := func() string {
				var b strings.Builder
				for n, p := range agents {
					fmt.Fprintf(&b, "agent on %s:\n%s\n", n.Name, agentExitTail(p.Output(), 30))
				}
				return b.String()
			}
			h := services.Helper{TB: t, CS: env.CS, Namespace: extIPNamespace, Dumps: []func() string{logs}}
			svc := h.CreateTemp(services.New(extIPNamespace, "taker-"+tc.name, func(s *corev1.Service) {
				s.Spec.Selector = map[string]string{"app": "extip"}
				s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
				s.Spec.ExternalIPs = []string{extIPInside.String(), extIPOutside.String()}
			}))
			clusterIP := netip.MustParseAddr(svc.Spec.ClusterIP)

			for _, via := range []*netlab.Node{nodes[0], nodes[1]} {
				mode := map[bool]string{true: "nftables", false: "iptables"}[via == nodes[0]]
				for _, dst := range []netip.Addr{clusterIP, extIPInside, extIPOutside} {
					extIPRoute(t, client, dst, via)
				}
				// The Service is in the node's rules once its ClusterIP is served: every address
				// of it came with the same sync.
				extIPServed(t, client, clusterIP, backend.Name, via.Name+" ("+mode+") ClusterIP", logs)
				for _, a := range tc.served {
					extIPServed(t, client, a, backend.Name, via.Name+" ("+mode+") externalIP", logs)
				}
				ruleset := extIPRuleset(t, via, mode)
				for _, a := range tc.served {
					if !extIPMentions(ruleset, a) {
						t.Errorf("%s (%s): the rules do not mention the served address %s: the check below could not tell", via.Name, mode, a)
					}
				}
				for _, a := range tc.refused {
					if extIPMentions(ruleset, a) {
						t.Errorf("%s (%s): refused externalIP %s is in the rules:\n%s", via.Name, mode, a, ruleset)
					}
					for i := range 3 {
						r, err := extIPRequest(client, netip.AddrPortFrom(a, 80))
						if err == nil {
							t.Errorf("%s (%s): refused externalIP %s:80 answered by %q (request %d); want no answer", via.Name, mode, a, r.Server, i+1)
							break
						}
						if i == 0 {
							t.Logf("%s (%s): %s:80 not answered: %v", via.Name, mode, a, err)
						}
					}
				}
			}

			if len(tc.refused) == 0 {
				// Both agents have programmed the Service (served above): a refusal's Event would
				// have been queued by now.
				for _, reason := range h.Reasons(svc.Name) {
					if reason == "ExternalIPsRefused" {
						t.Errorf("an ExternalIPsRefused Event under policy %s", tc.name)
					}
				}
				return
			}
			ev := h.WaitEvent(svc.Name, "ExternalIPsRefused", tc.note[0])
			if ev.Type != corev1.EventTypeWarning {
				t.Errorf("Event type %s, want Warning", ev.Type)
			}
			for _, want := range tc.note {
				if !strings.Contains(ev.Message, want) {
					t.Errorf("Event note %q does not name %q", ev.Message, want)
				}
			}
			for _, a := range tc.served {
				if strings.Contains(ev.Message, a.String()) {
					t.Errorf("Event note %q names the allowed address %s", ev.Message, a)
				}
			}
			// Both agents recorded it (the second found the first's); the Service has one.
			wait.For(t, 60*time.Second, "both agents to have recorded the Event", func() error {
				for n, p := range agents {
					if !strings.Contains(p.Output(), `"Recorded the ExternalIPsRefused Event"`) {
						return fmt.Errorf("not the agent on %s", n.Name)
					}
				}
				return nil
			}, logs)
			evs, err := services.Events(ctx, env.CS, extIPNamespace, svc.Name)
			if err != nil {
				t.Fatal(err)
			}
			var refusals []string
			for _, e := range evs {
				if e.Reason == "ExternalIPsRefused" {
					refusals = append(refusals, fmt.Sprintf("%s by %s: %s", e.Name, e.ReportingInstance, e.Message))
				}
			}
			if len(refusals) != 1 {
				t.Errorf("%d ExternalIPsRefused Events from two agents, want 1: %q", len(refusals), refusals)
			}
			t.Logf("Event: %s", strings.Join(refusals, "; "))
		})
	}

	t.Run("bad value", func(t *testing.T) {
		for _, args := range [][]string{{"--external-ip-policy=block"}, {"--external-ip-policy=cidrs", "--external-ip-allowed-cidrs=198.18.64.1"}} {
			out, err := nodes[0].Exec(ctx, env.Agent, append([]string{"--kubeconfig=" + env.Kubeconfig, "--hostname-override=" + nodes[0].Name}, args...)...)
			name, value, _ := strings.Cut(strings.TrimPrefix(args[len(args)-1], "--"), "=")
			if err == nil || !strings.Contains(string(out), "--"+name) || !strings.Contains(string(out), value) {
				t.Errorf("portico-agent %v: %v\n%s\nwant a startup error naming --%s and %q", args, err, out, name, value)
			}
			if name == "external-ip-policy" && !strings.Contains(string(out), "allow, deny, cidrs") {
				t.Errorf("portico-agent %v does not list the accepted values:\n%s", args, out)
			}
		}
	})
}

// extIPEnv starts a lab of three nodes and a client and a control plane, closed at the test's
// end.
func extIPEnv(t *testing.T) *labcluster.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-ops-extip-", Lab: netlab.Options{Nodes: 3, Clients: 1}})
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// extIPAgent runs portico-agent on n with args until the test ends, then removes its rules, and
// waits for its first sync.
func extIPAgent(t *testing.T, env *labcluster.Env, n *netlab.Node, args []string) *netlab.Process {
	t.Helper()
	t.Cleanup(func() {
		// After the agent stopped (Run's cleanup runs first): the next case starts clean.
		if out, err := n.Exec(context.WithoutCancel(t.Context()), env.Agent, "--cleanup"); err != nil {
			t.Errorf("portico-agent --cleanup on %s: %v\n%s", n.Name, err, out)
		}
	})
	p := n.Run(t, env.Agent, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := p.WaitFor(ctx, `"Synced"`); err != nil {
		t.Fatalf("the agent on %s: %v\n%s", n.Name, err, agentExitTail(p.Output(), 40))
	}
	return p
}

// extIPRoute sends dst from h via node's LAN address until the test ends.
func extIPRoute(t *testing.T, h *netlab.Host, dst netip.Addr, via *netlab.Node) {
	t.Helper()
	host := netip.PrefixFrom(dst, dst.BitLen()).String()
	if out, err := h.Exec(t.Context(), "ip", "route", "replace", host, "via", via.Addr.String()); err != nil {
		t.Fatalf("ip route replace %s via %s: %v\n%s", host, via.Addr, err, out)
	}
	t.Cleanup(func() { _, _ = h.Exec(context.Background(), "ip", "route", "del", host) })
}

// extIPRequest sends one TCP request to dst from h.
func extIPRequest(h *netlab.Host, dst netip.AddrPort) (netlab.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return h.Request(ctx, "tcp", dst)
}

// extIPServed waits until the backend answers h's requests to a:80.
func extIPServed(t *testing.T, h *netlab.Host, a netip.Addr, backend, what string, dumps ...func() string) {
	t.Helper()
	wait.For(t, 60*time.Second, fmt.Sprintf("%s %s:80 served by the backend", what, a), func() error {
		r, err := extIPRequest(h, netip.AddrPortFrom(a, 80))
		if err != nil {
			return err
		}
		if r.Server != backend {
			return fmt.Errorf("answered by %q", r.Server)
		}
		return nil
	}, dumps...)
}

// extIPRuleset is the agent's rules on n: its nftables tables, or the nat table of iptables.
func extIPRuleset(t *testing.T, n *netlab.Node, mode string) string {
	t.Helper()
	cmd := []string{"nft", "list", "ruleset"}
	if mode == "iptables" {
		cmd = []string{"iptables-save", "-t", "nat"}
	}
	out, err := n.Exec(t.Context(), cmd[0], cmd[1:]...)
	if err != nil {
		t.Fatalf("%v on %s: %v\n%s", cmd, n.Name, err, out)
	}
	if !strings.Contains(string(out), "portico") && !strings.Contains(string(out), "PTC-") {
		t.Fatalf("no rules of the agent in %s on %s:\n%s", strings.Join(cmd, " "), n.Name, out)
	}
	return string(out)
}

// extIPMentions reports whether the rules name a (not as the prefix of a longer address).
func extIPMentions(rules string, a netip.Addr) bool {
	return regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(a.String()) + `($|[^0-9])`).MatchString(rules)
}
