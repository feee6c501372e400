package dataplane_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// One network lab and one control plane serve every test and benchmark of the package; they
// start on first use. The lab has eight nodes: node1 and node2 run the agents the tests share in
// iptables mode, node5 and node6 in nftables mode (see modes); node3 and node4 are left to
// tests that run their own agent and, with node7 and node8, to the benchmarks (portico-agent and
// kube-proxy, in both modes, side by side); and two clients on the LAN.
var shared struct {
	labcluster.Suite
	env     *labcluster.Env // lab, control plane, Nodes, agent binary
	lab     *netlab.Lab
	cluster *cluster.Cluster
	cs      kubernetes.Interface
	dir     string
	agent   string // portico-agent binary
	kubecfg string // kubeconfig reaching the apiserver from the node namespaces

	pods atomic.Int32 // numbers pod names, unique in the lab

	mu     sync.Mutex
	agents map[string]*netlab.Process // node name -> running agent
	// started holds, per proxy mode, the outcome of starting its shared agents (once).
	started map[string]*agentsStart
}

type agentsStart struct {
	once sync.Once
	err  error
}

// The proxy modes the tests run in: forModes runs a test once per mode, each against the
// shared agents of that mode's two nodes (the lab's node indexes).
const (
	modeIPTables = "iptables"
	modeNFTables = "nftables"
)

var modes = []string{modeIPTables, modeNFTables}

var modeNodes = map[string][2]int{modeIPTables: {0, 1}, modeNFTables: {4, 5}}

// nodeMode is the proxy mode of the agents run on the lab node named name: nftables on the
// nftables mode's nodes, iptables everywhere else.
func nodeMode(name string) string {
	for _, i := range modeNodes[modeNFTables] {
		if name == fmt.Sprintf("node%d", i+1) {
			return modeNFTables
		}
	}
	return modeIPTables
}

// testModes maps each running forModes subtest (*testing.T) to its mode.
var testModes sync.Map

// forModes runs body as one subtest per proxy mode; newEnv(t) inside it uses that mode's
// nodes and agents.
func forModes(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m, func(t *testing.T) {
			testModes.Store(t, m)
			defer testModes.Delete(t)
			body(t)
		})
	}
}

func TestMain(m *testing.M) { shared.Main(m, func() error { return shared.env.Close() }) }

// setup starts (once) the lab, the control plane and the agent binary. Without root, iproute2
// or iptables it fails tb naming the fix (or skips it, with PORTICO_SKIP_PRIVILEGED=1).
func setup(tb testing.TB) {
	tb.Helper()
	shared.Setup(tb, start, prereq.IPRoute2, prereq.IPTables, prereq.NFTables)
}

func start() error {
	// A dual-stack lab and cluster: Services are IPv4 unless a test asks for IPv6, nodes and
	// pods have both families, and the agents program both.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	shared.env, err = labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-agent-",
		Lab: netlab.Options{Nodes: 8, Clients: 2, Router: true, IPv6: true}})
	if err != nil {
		return err
	}
	e := shared.env
	shared.dir, shared.agent, shared.lab, shared.cluster, shared.cs, shared.kubecfg = e.Dir, e.Agent, e.Lab, e.Cluster, e.CS, e.Kubeconfig
	// Real nodes have a default route; these send what they do not DNAT to the router (which
	// drops it), so unhandled service traffic is forwarded and meets the filter rules instead of
	// an ICMP "network unreachable" from the node's routing.
	for _, n := range shared.lab.Nodes() {
		if _, err := n.Exec(context.Background(), "ip", "route", "add", "198.18.0.0/16", "via", shared.lab.Router().Addr.String()); err != nil {
			return err
		}
		if _, err := n.Exec(context.Background(), "ip", "-6", "route", "add", serviceRange6.String(), "via", shared.lab.Router().Addr6.String()); err != nil {
			return err
		}
	}
	return nil
}

// serviceRange6 covers the IPv6 ClusterIP range and the IPv6 load-balancer and external IPs
// the tests use (cluster.ServiceCIDR6, cluster.LBPoolCIDR6).
var serviceRange6 = netip.MustParsePrefix("fd00:c613:ff00::/40")

// clusterCIDRs are the pod ranges of every node, both families.
func clusterCIDRs() string {
	var s []string
	for _, n := range shared.lab.Nodes() {
		s = append(s, n.PodCIDR.String(), n.PodCIDR6.String())
	}
	return strings.Join(s, ",")
}

// agentArgs are the flags of a test agent on node.
func agentArgs(node string, extra ...string) []string {
	return append([]string{
		"--kubeconfig=" + shared.kubecfg,
		"--hostname-override=" + node,
		"--iptables-sync-period=5s",
		"--iptables-min-sync-period=100ms",
		"--healthz-bind-address=0.0.0.0:10256",
		"--metrics-bind-address=0.0.0.0:10249",
		"--cluster-cidr=" + clusterCIDRs(),
		"--proxy-mode=" + nodeMode(node),
		"-v=1",
	}, extra...)
}

// env is what a test works with: the lab, its namespace, the shared agents of its proxy mode
// (node1 and node2 are that mode's two nodes).
type env struct {
	t       *testing.T
	mode    string
	ctx     context.Context
	ns      string
	lab     *netlab.Lab
	cs      kubernetes.Interface
	node1   *netlab.Node
	node2   *netlab.Node
	client  *netlab.Host
	client2 *netlab.Host
}

func newEnv(t *testing.T) *env {
	t.Helper()
	setup(t)
	mode := modeIPTables
	if m, ok := testModes.Load(t); ok {
		mode = m.(string)
	}
	nodes := shared.lab.Nodes()
	mine := []*netlab.Node{nodes[modeNodes[mode][0]], nodes[modeNodes[mode][1]]}
	shared.mu.Lock()
	if shared.started == nil {
		shared.started = map[string]*agentsStart{}
		shared.agents = map[string]*netlab.Process{}
	}
	if shared.started[mode] == nil {
		shared.started[mode] = &agentsStart{}
	}
	st := shared.started[mode]
	shared.mu.Unlock()
	st.once.Do(func() {
		for _, n := range mine {
			if err := startAgent(n); err != nil {
				st.err = err
			}
		}
	})
	if st.err != nil {
		t.Fatal(st.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		// Keep names of one test's modes apart: a namespace may still be terminating.
		name = fmt.Sprintf("%s-%08x", name[:31], crc32.ChecksumIEEE([]byte(name)))
	}
	e := &env{t: t, mode: mode, ctx: ctx, ns: name, lab: shared.lab, cs: shared.cs,
		node1: mine[0], node2: mine[1],
		client: shared.lab.Clients()[0], client2: shared.lab.Clients()[1]}
	if err := shared.cluster.EnsureNamespace(ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			for name, p := range shared.agents {
				out := p.Output()
				if len(out) > 6000 {
					out = out[len(out)-6000:]
				}
				t.Logf("agent on %s, output tail:\n%s", name, out)
			}
		}
		// The Services go first, explicitly: the namespace may take long to go (or never, without
		// the namespace controller), and a Service left behind would keep claiming its
		// addresses from the next test (the other mode's run reuses them).
		ctx := context.Background()
		if list, err := e.cs.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, svc := range list.Items {
				_ = e.cs.CoreV1().Services(e.ns).Delete(ctx, svc.Name, metav1.DeleteOptions{})
			}
		}
		_ = e.cs.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{})
	})
	return e
}

// startAgent runs portico-agent (with extra flags) in n's namespace and waits for its first sync.
func startAgent(n *netlab.Node, extra ...string) error {
	p, err := n.Start(shared.agent, agentArgs(n.Name, extra...)...)
	if err != nil {
		return err
	}
	shared.mu.Lock()
	shared.agents[n.Name] = p
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.WaitFor(ctx, `"Synced"`); err != nil {
		return err
	}
	return nil
}

func stopAgent(t *testing.T, n *netlab.Node) {
	t.Helper()
	shared.mu.Lock()
	p := shared.agents[n.Name]
	shared.mu.Unlock()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

func restartAgent(t *testing.T, n *netlab.Node) {
	t.Helper()
	if err := startAgent(n); err != nil {
		t.Fatal(err)
	}
}

// pod adds a pod namespace to node, named uniquely in the lab after name.
func (e *env) pod(node *netlab.Node, name string) *netlab.Pod {
	e.t.Helper()
	return node.AddPod(e.t, fmt.Sprintf("p%d-%s", shared.pods.Add(1), name))
}

// backend adds a pod named name on node running TCP and UDP echo servers on 8080, and
// registers it as a Ready Pod with labels app=app.
func (e *env) backend(node *netlab.Node, name, app string) *netlab.Pod {
	e.t.Helper()
	p := e.pod(node, name)
	p.StartEchoServer(e.t, "tcp", 8080)
	p.StartEchoServer(e.t, "udp", 8080)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": app}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo", Ports: []corev1.ContainerPort{
		{Name: "echo", ContainerPort: 8080},
	}}}
	if _, err := shared.cluster.CreateReadyPod(e.ctx, pod, node.Name, p.Addr, p.Addr6); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// service creates a Service selecting app=app with TCP port 80 -> 8080 (and UDP 80 -> 8080
// when udp), mutated by mutate.
func (e *env) service(name, app string, mutate ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	svc := services.New(e.ns, name, append([]func(*corev1.Service){func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": app}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	}}, mutate...)...)
	return services.Helper{TB: e.t, CS: e.cs, Namespace: e.ns}.Create(svc)
}

func withUDP(s *corev1.Service) {
	s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "udp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolUDP})
}

func loadBalancer(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }

func local(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

// setIngress sets status.loadBalancer.ingress to ip, as a load-balancer controller would, and
// routes ip via node on both clients for the rest of the test.
func (e *env) setIngress(svc *corev1.Service, ip netip.Addr, via *netlab.Node) {
	e.t.Helper()
	svc, err := e.cs.CoreV1().Services(e.ns).Get(e.ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String()}}
	if _, err := e.cs.CoreV1().Services(e.ns).UpdateStatus(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	for _, c := range []*netlab.Host{e.client, e.client2} {
		e.route(c, ip, via)
	}
}

// route sends dst from h via node until the test ends.
func (e *env) route(h *netlab.Host, dst netip.Addr, via *netlab.Node) {
	e.t.Helper()
	host, gw := netip.PrefixFrom(dst, dst.BitLen()).String(), via.Addr.String()
	if dst.Is6() {
		gw = via.Addr6.String()
	}
	if _, err := h.Exec(e.ctx, "ip", "route", "replace", host, "via", gw); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _, _ = h.Exec(context.Background(), "ip", "route", "del", host) })
}

// eventually retries check until it succeeds or timeout passes.
func (e *env) eventually(what string, timeout time.Duration, check func() error) {
	e.t.Helper()
	wait.For(e.t, timeout, what, check)
}

// request sends one request with a short timeout.
func (e *env) request(from *netlab.Host, network string, dst netip.AddrPort) (netlab.Reply, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	return from.Request(ctx, network, dst)
}

// reach waits until from reaches dst and returns the reply.
func (e *env) reach(from *netlab.Host, network string, dst netip.AddrPort) netlab.Reply {
	e.t.Helper()
	var r netlab.Reply
	e.eventually(fmt.Sprintf("%s -> %s %s", from.Name, network, dst), 30*time.Second, func() error {
		var err error
		r, err = e.request(from, network, dst)
		return err
	})
	return r
}

func clusterIP(svc *corev1.Service) netip.Addr { return netip.MustParseAddr(svc.Spec.ClusterIP) }

func addrPort(a netip.Addr, port int32) netip.AddrPort { return netip.AddrPortFrom(a, uint16(port)) }
