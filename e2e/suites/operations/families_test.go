package operations_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// TestFamiliesFollowNode (issue 31 item 8): an agent started while its Node has only an IPv4
// InternalIP programs IPv6 as soon as the Node gains an IPv6 address, without a restart. On a
// real control plane and a dual-stack lab node whose Node object first lists its IPv4 address
// only, a dual-stack externalTrafficPolicy: Local LoadBalancer Service has a backend pod (real
// echo server, both families) on the node; per proxy mode the agent starts, serves the IPv4
// ClusterIP to a client and has no IPv6 rules; then the Node's status gets its IPv6 address
// (as a kubelet or cloud controller that reports it late would) and the test waits, with the
// same agent process, for a client's IPv6 requests to the IPv6 ClusterIP and to the node's
// IPv6 address on the NodePort to reach the pod, and for the Service's health check to count
// the pod's IPv6 address as a local endpoint too. Then the Node loses its IPv6 address again:
// while the pod (with its IPv6 endpoint) is on the node the IPv6 rules stay; once it is deleted
// they go, and the IPv4 rules stay.
//
// On d6507e1 the agent kept programming IPv4 only: no IPv6 rules appeared and the IPv6
// requests timed out (the wait fails after 60 s; the health check stayed at 1 local endpoint).
func TestFamiliesFollowNode(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.NFTables, prereq.IPTables)
	env := familiesEnv(t)
	node, client := env.Lab.Nodes()[0], env.Lab.Clients()[0]
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			// The Node as a kubelet that has not yet reported its IPv6 address registers it.
			familiesSetNode(t, env, node, node.Addr)
			ns := "families-" + mode
			if err := env.Cluster.EnsureNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			pod := node.AddPod(t, "fam-"+mode[:4])
			pod.StartEchoServer(t, "tcp", 8080)
			podObj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns, Labels: map[string]string{"app": "echo"}}}
			podObj.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo",
				Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 8080}}}}
			if _, err := env.Cluster.CreateReadyPod(ctx, podObj, node.Name, pod.Addr, pod.Addr6); err != nil {
				t.Fatal(err)
			}
			dual := corev1.IPFamilyPolicyRequireDualStack
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				IPFamilyPolicy: &dual, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
				Selector: map[string]string{"app": "echo"},
				Ports:    []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			}}
			svc, err := env.CS.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = env.CS.CoreV1().Services(ns).Delete(context.WithoutCancel(ctx), svc.Name, metav1.DeleteOptions{})
				_ = env.CS.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), podObj.Name, metav1.DeleteOptions{})
			})
			if len(svc.Spec.ClusterIPs) != 2 {
				t.Fatalf("Service ClusterIPs %v, want one per family", svc.Spec.ClusterIPs)
			}
			cip4, cip6 := netip.MustParseAddr(svc.Spec.ClusterIPs[0]), netip.MustParseAddr(svc.Spec.ClusterIPs[1])
			nodePort, hcPort := uint16(svc.Spec.Ports[0].NodePort), uint16(svc.Spec.HealthCheckNodePort)
			for _, ip := range []netip.Addr{cip4, cip6} {
				familiesRoute(t, client, ip, node)
			}

			p, err := node.Start(env.Agent, "--kubeconfig="+env.Kubeconfig, "--hostname-override="+node.Name,
				"--proxy-mode="+mode, "--iptables-sync-period=5s", "--iptables-min-sync-period=100ms",
				"--healthz-bind-address=0", "--metrics-bind-address=0", "-v=1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = p.Stop()
				// The next mode starts from a node without this one's rules.
				if out, err := node.Exec(context.WithoutCancel(ctx), env.Agent, "--cleanup"); err != nil {
					t.Errorf("portico-agent --cleanup: %v\n%s", err, out)
				}
			})
			logTail := func() string { return "agent log:\n" + agentExitTail(p.Output(), 40) }
			hc := netip.AddrPortFrom(node.Addr, hcPort)
			wait.For(t, 60*time.Second, "the agent serving the IPv4 ClusterIP (pod and health check ready)", func() error {
				if err := familiesReach(ctx, client, netip.AddrPortFrom(cip4, 80), pod.Name); err != nil {
					return err
				}
				n, err := familiesLocalEndpoints(ctx, client, hc)
				if err != nil {
					return err
				}
				if n != 1 {
					return fmt.Errorf("health check on %s counts %d local endpoints, want 1 (IPv4 only)", hc, n)
				}
				return nil
			}, logTail)
			if rules := familiesIPv6Rules(ctx, node, mode); rules != "" {
				t.Fatalf("the Node has no IPv6 address, yet the agent programs IPv6: %s\n%s", rules, logTail())
			}

			// The Node's status gains its IPv6 address.
			familiesSetNode(t, env, node, node.Addr, node.Addr6)
			added := time.Now()
			wait.For(t, 60*time.Second, "IPv6 served by the same agent: ClusterIP, NodePort, health check", func() error {
				if err := familiesReach(ctx, client, netip.AddrPortFrom(cip6, 80), pod.Name); err != nil {
					return fmt.Errorf("IPv6 ClusterIP: %w (IPv6 rules: %q)", err, familiesIPv6Rules(ctx, node, mode))
				}
				if err := familiesReach(ctx, client, netip.AddrPortFrom(node.Addr6, nodePort), pod.Name); err != nil {
					return fmt.Errorf("IPv6 NodePort: %w", err)
				}
				n, err := familiesLocalEndpoints(ctx, client, hc)
				if err != nil {
					return err
				}
				if n != 2 {
					return fmt.Errorf("health check on %s counts %d local endpoints, want 2 (the pod's IPv4 and IPv6 addresses)", hc, n)
				}
				return nil
			}, logTail)
			t.Logf("IPv6 served %v after the Node's update", time.Since(added).Round(time.Millisecond))
			select {
			case <-p.Done():
				t.Fatalf("the agent exited\n%s", logTail())
			default:
			}
			if !strings.Contains(p.Output(), `"IP families follow the Node's addresses"`) {
				t.Errorf("the change of families is not logged\n%s", logTail())
			}

			// The Node's status loses its IPv6 address while the pod still has one: the IPv6
			// rules stay (two full syncs later, one surely after the update reached the agent).
			fullSyncs := func() int { return strings.Count(p.Output(), `"Synced" full=true`) }
			before := fullSyncs()
			familiesSetNode(t, env, node, node.Addr)
			wait.For(t, 60*time.Second, "two full syncs after the Node lost its IPv6 address", func() error {
				if n := fullSyncs() - before; n < 2 {
					return fmt.Errorf("%d full syncs", n)
				}
				return nil
			}, logTail)
			if err := familiesReach(ctx, client, netip.AddrPortFrom(cip6, 80), pod.Name); err != nil {
				t.Errorf("IPv6 no longer served while the pod has an IPv6 endpoint here: %v\n%s", err, logTail())
			}
			// The pod goes: the next full sync (every --iptables-sync-period) removes the IPv6
			// rules and keeps the IPv4 ones.
			if err := env.Cluster.ForceDelete(ctx, ns, podObj.Name); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 60*time.Second, "the IPv6 rules removed, the IPv4 ones kept", func() error {
				if rules := familiesIPv6Rules(ctx, node, mode); rules != "" {
					return fmt.Errorf("IPv6 rules left: %s", rules)
				}
				if !familiesIPv4Rules(ctx, node, mode) {
					return errors.New("the IPv4 rules went too")
				}
				return nil
			}, logTail)
		})
	}
}

// familiesEnv starts a dual-stack lab of one node and one client and a control plane (IPv4 and
// IPv6 Service ranges) for the test, closed at its end.
func familiesEnv(t *testing.T) *labcluster.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-ops-families-",
		Lab: netlab.Options{Nodes: 1, Clients: 1, IPv6: true}})
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

// familiesSetNode sets the Node's status addresses to addrs (its InternalIPs), as its kubelet
// would.
func familiesSetNode(t *testing.T, env *labcluster.Env, n *netlab.Node, addrs ...netip.Addr) {
	t.Helper()
	if _, err := env.Cluster.RegisterNode(t.Context(), cluster.NodeSpec{Name: n.Name, InternalIPs: addrs,
		PodCIDRs: []netip.Prefix{n.PodCIDR, n.PodCIDR6}}); err != nil {
		t.Fatal(err)
	}
}

// familiesRoute sends dst from h via node until the test ends.
func familiesRoute(t *testing.T, h *netlab.Host, dst netip.Addr, via *netlab.Node) {
	t.Helper()
	gw := via.Addr
	if dst.Is6() {
		gw = via.Addr6
	}
	host := netip.PrefixFrom(dst, dst.BitLen()).String()
	if _, err := h.Exec(t.Context(), "ip", "route", "replace", host, "via", gw.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.Exec(context.Background(), "ip", "route", "del", host) })
}

// familiesReach sends one TCP request from h to dst and wants the echo server of pod to answer.
func familiesReach(ctx context.Context, h *netlab.Host, dst netip.AddrPort, pod string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := h.Request(ctx, "tcp", dst)
	if err != nil {
		return err
	}
	if r.Server != pod {
		return fmt.Errorf("%s answered by %q, want %q", dst, r.Server, pod)
	}
	return nil
}

// familiesLocalEndpoints asks the health check at hc (from h) how many local endpoints it counts.
func familiesLocalEndpoints(ctx context.Context, h *netlab.Host, hc netip.AddrPort) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.DialTCP(ctx, hc) }}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hc.String()+"/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("health check %s: %w", hc, err)
	}
	defer resp.Body.Close()
	var body struct {
		LocalEndpoints int `json:"localEndpoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("health check %s answered %s: %w", hc, resp.Status, err)
	}
	return body.LocalEndpoints, nil
}

// familiesIPv4Rules reports whether the agent's IPv4 rules are in the node's netfilter: table ip
// portico (nftables), chain PTC-SERVICES in iptables-save's nat table (iptables).
func familiesIPv4Rules(ctx context.Context, n *netlab.Node, mode string) bool {
	if mode == "nftables" {
		_, err := n.Exec(ctx, "nft", "list", "table", "ip", "portico")
		return err == nil
	}
	out, err := n.Exec(ctx, "iptables-save", "-t", "nat")
	return err == nil && strings.Contains(string(out), ":PTC-SERVICES ")
}

// familiesIPv6Rules is what the agent holds in the node's IPv6 netfilter in mode: table ip6
// portico (nftables), the PTC- chains of ip6tables-save (iptables); "" when none.
func familiesIPv6Rules(ctx context.Context, n *netlab.Node, mode string) string {
	if mode == "nftables" {
		out, err := n.Exec(ctx, "nft", "list", "tables")
		if err != nil {
			return fmt.Sprintf("nft list tables: %v: %s", err, out)
		}
		if strings.Contains(string(out), "ip6 portico") {
			return "table ip6 portico"
		}
		return ""
	}
	out, err := n.Exec(ctx, "ip6tables-save")
	if err != nil {
		return fmt.Sprintf("ip6tables-save: %v", err)
	}
	var chains []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, ":PTC-") {
			chains = append(chains, strings.Fields(l)[0][1:])
		}
	}
	return strings.Join(chains, " ")
}
