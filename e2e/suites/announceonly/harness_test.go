package announceonly

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

const (
	namespace = "announceonly"
	echoPort  = 8080
	// The pool, inside the ranges test clusters keep for load balancers, and the client's
	// on-link route for it: it resolves the VIPs by ARP alone.
	pool   = "198.18.222.0/28"
	onLink = "198.18.222.0/24"
)

// kubeProxyModes are kube-proxy's two Linux modes.
var kubeProxyModes = []string{"iptables", "nftables"}

// shared is one lab, control plane and controller for the package; each test starts its own
// kube-proxies and agents.
var shared struct {
	labcluster.Suite
	*labcluster.Env
	kubeProxy string
	macs      map[string]net.HardwareAddr
	pods      map[string]*netlab.Pod // node -> its backend pod (app=web)
}

func TestMain(m *testing.M) { shared.Main(m, func() error { return shared.Env.Close() }) }

func setup(tb testing.TB) {
	tb.Helper()
	shared.Setup(tb, start, prereq.IPRoute2, prereq.IPTables, prereq.NFTables, prereq.IPUtilsArping)
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bins, err := k8sbin.Ensure(ctx, k8sbin.Options{})
	if err != nil {
		return err
	}
	shared.kubeProxy = bins.KubeProxy
	if shared.Env, err = labcluster.Start(ctx, "portico-e2e-announceonly-", filepath.Join("..", "..", "..", "deploy", "crds"), namespace); err != nil {
		return err
	}
	shared.macs, shared.pods = map[string]net.HardwareAddr{}, map[string]*netlab.Pod{}
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
	p := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{pool}, Announce: v1alpha1.Announce{L2: &v1alpha1.L2Announce{}}}}
	if err := shared.CL.Create(ctx, p); err != nil {
		return fmt.Errorf("creating pool: %w", err)
	}
	_, err = shared.Lab.Clients()[0].Exec(ctx, "ip", "route", "add", onLink, "dev", "eth0")
	return err
}

// backends adds one ready pod per node labelled app=web (once for the package) and runs a TCP
// echo server on echoPort in each for tb.
var backendsOnce sync.Once

func backends(tb testing.TB) {
	backendsOnce.Do(func() {
		for _, n := range shared.Lab.Nodes() {
			shared.pods[n.Name] = readyPod(tb, n, "web-"+n.Name, "web")
		}
	})
	for _, n := range shared.Lab.Nodes() {
		shared.pods[n.Name].StartEchoServer(tb, "tcp", echoPort)
	}
}

// labPods are the pods added to the lab, by name: a lab pod outlives the test that added it
// (-count=2 asks for it again).
var labPods sync.Map

// readyPod adds the pod name on n with label app=app (the lab's pod once, the API object for
// tb), ready in the API.
func readyPod(tb testing.TB, n *netlab.Node, name, app string) *netlab.Pod {
	v, ok := labPods.Load(name)
	if !ok {
		v, _ = labPods.LoadOrStore(name, n.AddPod(tb, name))
	}
	p := v.(*netlab.Pod)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": app}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo"}}
	if _, err := shared.Cluster.CreateReadyPod(context.Background(), pod, n.Name, p.Addr, p.Addr6); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if app != "web" { // the package's backends stay
			// At once: no kubelet confirms a graceful deletion here.
			_ = shared.CS.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
	})
	return p
}

// startKubeProxy runs kube-proxy in mode on n, on its default ports, until tb ends, then
// removes its rules (kube-proxy --cleanup); it returns once kube-proxy's rules are in the
// kernel.
func startKubeProxy(tb testing.TB, n *netlab.Node, mode string) *netlab.Process {
	tb.Helper()
	p, err := n.Start(shared.kubeProxy, "--kubeconfig="+shared.Kubeconfig, "--hostname-override="+n.Name,
		"--proxy-mode="+mode, "--detect-local-mode=NodeCIDR",
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=127.0.0.1:10249",
		"--iptables-min-sync-period=100ms", "--conntrack-max-per-core=0", "--v=1")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = p.Stop()
		if tb.Failed() {
			tb.Logf("kube-proxy on %s, output tail:\n%s", n.Name, tail(p.Output()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := n.Exec(ctx, shared.kubeProxy, "--cleanup", "--proxy-mode="+mode); err != nil {
			tb.Logf("kube-proxy --cleanup on %s: %v\n%s", n.Name, err, out)
		}
	})
	wait.For(tb, time.Minute, "kube-proxy's "+mode+" rules on "+n.Name, func() error {
		return kubeProxyRules(n, mode)
	}, func() string { return tail(p.Output()) })
	return p
}

// kubeProxyRules is nil when kube-proxy's rules of mode are in n's kernel: its table
// "kube-proxy" (nftables), or its KUBE-SERVICES chain in the nat table (iptables).
func kubeProxyRules(n *netlab.Node, mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if mode == "nftables" {
		_, err := n.Exec(ctx, "nft", "list", "table", "ip", "kube-proxy")
		return err
	}
	out, err := n.Exec(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), ":KUBE-SERVICES ") {
		return errors.New("no KUBE-SERVICES chain in the nat table")
	}
	return nil
}

// porticoRules lists what n's kernel holds of Portico's rules: its nftables table in either
// family, its iptables chains (prefix PTC-) in either family.
func porticoRules(tb testing.TB, n *netlab.Node) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var found []string
	for _, fam := range []string{"ip", "ip6"} {
		if _, err := n.Exec(ctx, "nft", "list", "table", fam, nftables.TableName); err == nil {
			found = append(found, "nftables table "+fam+" "+nftables.TableName)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := n.Exec(ctx, save)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, ":"+rules.Prefix) {
				found = append(found, save+": "+line)
			}
		}
	}
	return found
}

// agentBase are the flags of every agent here: the lab's kubeconfig and the node's name.
func agentBase(n *netlab.Node) []string {
	return []string{"--kubeconfig=" + shared.Kubeconfig, "--hostname-override=" + n.Name, "-v=1"}
}

// startAnnouncer runs portico-agent announce-only (--proxy-mode=none, l2, membership, the
// default ports) on n until tb ends and waits for its first sync. Without netAdmin it runs
// without CAP_NET_ADMIN (setpriv drops it from the bounding set): the announcers need
// CAP_NET_RAW only.
func startAnnouncer(tb testing.TB, n *netlab.Node, netAdmin bool) *netlab.Process {
	tb.Helper()
	return startAgent(tb, n, netAdmin, "--proxy-mode=none", "--announce=l2", "--membership",
		"--membership-rejoin-interval=1s", "--membership-restart-hold=0s")
}

// startAgent runs portico-agent with flags on n until tb ends (without CAP_NET_ADMIN unless
// netAdmin) and waits for its first sync.
func startAgent(tb testing.TB, n *netlab.Node, netAdmin bool, flags ...string) *netlab.Process {
	tb.Helper()
	args := append(agentBase(n), flags...)
	bin := shared.Agent
	if !netAdmin {
		bin, args = "setpriv", append([]string{"--bounding-set", "-net_admin", "--", shared.Agent}, args...)
	}
	p, err := n.Start(bin, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = p.Stop()
		if tb.Failed() {
			tb.Logf("portico-agent on %s, output tail:\n%s", n.Name, tail(p.Output()))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitFor(ctx, `"Synced"`); err != nil {
		tb.Fatalf("portico-agent %v on %s: %v\n%s", flags, n.Name, err, tail(p.Output()))
	}
	return p
}

// served waits until a new TCP connection from the client to vip's echo port is answered,
// by one of pods when given, and returns the pod that answered.
func served(tb testing.TB, vip netip.Addr, pods ...string) string {
	tb.Helper()
	var last string
	wait.For(tb, time.Minute, "the client served through "+vip.String(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := shared.Lab.Clients()[0].Request(ctx, "tcp", netip.AddrPortFrom(vip, echoPort))
		if err != nil {
			return err
		}
		last = r.Server
		if len(pods) > 0 && !contains(pods, r.Server) {
			return fmt.Errorf("served by %s, want one of %v", r.Server, pods)
		}
		return nil
	})
	return last
}

// arpingOnly asks with Debian's arping who has vip until only node's MAC answers.
func arpingOnly(tb testing.TB, vip netip.Addr, node string) {
	tb.Helper()
	wait.For(tb, time.Minute, "only "+node+" answering ARP for "+vip.String(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := shared.Lab.Clients()[0].Exec(ctx, "arping", "-c", "2", "-w", "2", "-I", "eth0", vip.String())
		if err != nil {
			return err
		}
		s := strings.ToLower(string(out))
		if !strings.Contains(s, shared.macs[node].String()) {
			return fmt.Errorf("no answer from %s (%s):\n%s", node, shared.macs[node], s)
		}
		for other, mac := range shared.macs {
			if other != node && strings.Contains(s, mac.String()) {
				return fmt.Errorf("%s (%s) answers too:\n%s", other, mac, s)
			}
		}
		return nil
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
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
