package l2

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/nodeproxy/announce/election"
)

const (
	namespace = "l2"
	echoPort  = 8080
	// Pool addresses, inside the ranges test clusters keep for load balancers.
	poolV4 = "198.18.220.0/28"
	poolV6 = "fd00:c613:ff01::200/124"
	// On-link routes on the client for the pool: it resolves the VIPs by ARP/NDP.
	onLink4 = "198.18.220.0/24"
	onLink6 = "fd00:c613:ff01::/112"
)

// shared is one lab, control plane, controller and three agents for the package.
var shared struct {
	labcluster.Suite
	*labcluster.Env // lab, control plane, controller

	mu     sync.Mutex
	agents map[string]*netlab.Process
	macs   map[string]net.HardwareAddr
	pods   map[string]*netlab.Pod // node -> its backend pod
}

func TestMain(m *testing.M) { shared.Main(m, func() error { return shared.Env.Close() }) }

func setup(tb testing.TB) {
	tb.Helper()
	shared.Setup(tb, start, prereq.IPRoute2, prereq.IPTables, prereq.IPUtilsArping)
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	shared.Env, err = labcluster.Start(ctx, "portico-e2e-l2agent-", filepath.Join("..", "..", "..", "deploy", "crds"), namespace)
	if err != nil {
		return err
	}
	shared.macs, shared.pods, shared.agents = map[string]net.HardwareAddr{}, map[string]*netlab.Pod{}, map[string]*netlab.Process{}
	for _, n := range shared.Lab.Nodes() {
		if err := n.Do(func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err == nil {
				shared.macs[n.Name] = ifi.HardwareAddr
			}
			return err
		}); err != nil {
			return err
		}
	}
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{poolV4, poolV6}, Announce: v1alpha1.Announce{L2: &v1alpha1.L2Announce{}}}}
	if err := shared.CL.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating pool: %w", err)
	}
	client := shared.Lab.Clients()[0]
	for _, c := range [][]string{{"ip", "route", "add", onLink4, "dev", "eth0"}, {"ip", "-6", "route", "add", onLink6, "dev", "eth0"}} {
		if _, err := client.Exec(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	for _, n := range shared.Lab.Nodes() {
		if err := startAgent(n); err != nil {
			return err
		}
	}
	return nil
}

// agentArgs are the flags of every agent: the DaemonSet's announcement flags with faster
// rejoins, so that a healed partition merges within a second or two.
func agentArgs(n *netlab.Node) []string {
	var cidrs []string
	for _, o := range shared.Lab.Nodes() {
		cidrs = append(cidrs, o.PodCIDR.String(), o.PodCIDR6.String())
	}
	return []string{
		"--kubeconfig=" + shared.Kubeconfig, "--hostname-override=" + n.Name,
		"--iptables-sync-period=30s", "--iptables-min-sync-period=100ms",
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=0.0.0.0:10249",
		"--cluster-cidr=" + strings.Join(cidrs, ","),
		"--announce=l2", "--membership", "--membership-rejoin-interval=1s", "-v=1",
	}
}

// startAgent runs portico-agent in n and waits for its first sync.
func startAgent(n *netlab.Node) error {
	p, err := n.Start(shared.Agent, agentArgs(n)...)
	if err != nil {
		return err
	}
	shared.mu.Lock()
	shared.agents[n.Name] = p
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return p.WaitFor(ctx, `"Synced"`)
}

func agentOf(name string) *netlab.Process {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.agents[name]
}

func nodeByName(name string) *netlab.Node {
	for _, n := range shared.Lab.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// backends adds one ready pod per node labelled app=web (once: the pods and their API objects
// stay for the package) and runs a TCP echo server on 8080 in each for tb. StartEchoServer
// stops a server when the test that started it ends, so every test that sends traffic to the
// pods calls backends: had only the first test started them, the pods of every later test
// would answer with resets (the API still lists them Ready, so the agents keep them as
// endpoints).
var backendsOnce sync.Once

func backends(tb testing.TB) {
	backendsOnce.Do(func() {
		for _, n := range shared.Lab.Nodes() {
			p := n.AddPod(tb, "web-"+n.Name)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + n.Name, Namespace: namespace, Labels: map[string]string{"app": "web"}}}
			pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo"}}
			if _, err := shared.Cluster.CreateReadyPod(context.Background(), pod, n.Name, p.Addr, p.Addr6); err != nil {
				tb.Fatal(err)
			}
			shared.pods[n.Name] = p
		}
	})
	for _, n := range shared.Lab.Nodes() {
		shared.pods[n.Name].StartEchoServer(tb, "tcp", echoPort)
	}
}

// vips picks an IPv4 and an IPv6 address of the pool with the same election order (so that one
// failure moves both to the same node) and returns them with that order.
func vips(tb testing.TB) (netip.Addr, netip.Addr, []string) {
	nodes := nodeObjects(tb)
	v4 := netip.MustParseAddr("198.18.220.5")
	want := election.Candidates(election.Input{VIP: v4, Nodes: nodes})
	p6 := netip.MustParsePrefix(poolV6)
	for a := p6.Addr(); p6.Contains(a); a = a.Next() {
		if slices.Equal(election.Candidates(election.Input{VIP: a, Nodes: nodes}), want) {
			return v4, a, want
		}
	}
	tb.Fatal("no IPv6 pool address with the IPv4 VIP's election order")
	return netip.Addr{}, netip.Addr{}, nil
}

func nodeObjects(tb testing.TB) []*corev1.Node {
	list, err := shared.CS.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var out []*corev1.Node
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// service creates the dual-stack LoadBalancer Service "name" selecting app=web, asking for v4
// and v6, and waits for the controller to report both.
func service(tb testing.TB, name string, v4, v6 netip.Addr) *corev1.Service {
	policy := corev1.IPFamilyPolicyRequireDualStack
	return createService(tb, name, []netip.Addr{v4, v6}, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	})
}

// createService creates the LoadBalancer Service "name" (TCP echo port, selecting app=web
// unless mutate says otherwise) asking for ips, and waits for the controller to report them.
func createService(tb testing.TB, name string, ips []netip.Addr, mutate func(*corev1.Service)) *corev1.Service {
	var want []string
	for _, ip := range ips {
		want = append(want, ip.String())
	}
	svc := services.LoadBalancer(namespace, name, func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = strings.Join(want, ",")
		s.Spec.Selector = map[string]string{"app": "web"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: echoPort, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP}}
		if mutate != nil {
			mutate(s)
		}
	})
	h := services.Helper{TB: tb, CS: shared.CS, Namespace: namespace, Timeout: 30 * time.Second}
	h.CreateTemp(svc)
	return h.Wait(name, "ingress "+strings.Join(want, ","), services.HasIngressIPs(ips...))
}

// clientHandle is a netlink handle in the client's namespace, to read its neighbour table.
func clientHandle(tb testing.TB) *netlink.Handle {
	return hostHandle(tb, shared.Lab.Clients()[0])
}

// hostHandle is a netlink handle in h's namespace.
func hostHandle(tb testing.TB, h *netlab.Host) *netlink.Handle {
	ns, err := netns.GetFromName(h.NS)
	if err != nil {
		tb.Fatal(err)
	}
	defer ns.Close()
	nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nh.Close)
	return nh
}

// waitNeighbour polls every 10 ms until the client's entry for v is node's MAC, and says when.
func waitNeighbour(h *netlink.Handle, v netip.Addr, node string, within time.Duration) (time.Time, bool) {
	want := shared.macs[node].String()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if netlab.Neighbour(h, v).String() == want {
			return time.Now(), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, false
}

// nodeOfMAC names the node whose eth0 has mac ("" none).
func nodeOfMAC(mac net.HardwareAddr) string {
	for n, m := range shared.macs {
		if m.String() == mac.String() {
			return n
		}
	}
	return ""
}

// arpingOnly asks with Debian's arping (not our code) who has v4 until only node's MAC answers,
// retrying for up to within.
func arpingOnly(tb testing.TB, v4 netip.Addr, node string, within time.Duration) {
	tb.Helper()
	end := time.Now().Add(within)
	for {
		err := arpingOnce(v4, node)
		if err == nil {
			return
		}
		if time.Now().After(end) {
			tb.Fatal(err)
		}
	}
}

func arpingOnce(v4 netip.Addr, node string) error {
	out, err := shared.Lab.Clients()[0].Exec(context.Background(), "arping", "-c", "2", "-w", "2", "-I", "eth0", v4.String())
	if err != nil {
		return fmt.Errorf("arping %s: %w\n%s", v4, err, out)
	}
	s := strings.ToLower(string(out))
	if !strings.Contains(s, shared.macs[node].String()) {
		return fmt.Errorf("arping %s: no answer from %s (%s):\n%s", v4, node, shared.macs[node], s)
	}
	for n, mac := range shared.macs {
		if n != node && strings.Contains(s, mac.String()) {
			return fmt.Errorf("arping %s: %s (%s) answers too:\n%s", v4, n, mac, s)
		}
	}
	return nil
}
