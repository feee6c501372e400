package migration_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/metallb"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/traffic"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/announce/l2"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

const (
	// switchOnLink is the client's on-link route for the layer-2 pool of testdata/switch.yaml
	// (it resolves the VIPs by ARP); switchPinned is an address a Service asks MetalLB for.
	switchOnLink = "198.18.222.0/24"
	switchPinned = "198.18.222.20"
	// switchRouted is where the BGP pool of the test lies, routed from the client behind the
	// router; nodeASN and routerASN are the sessions' AS numbers.
	switchRouted = "198.18.223.0/24"
	nodeASN      = 64512
	routerASN    = 64513

	// l2FailoverBound is one layer-2 failover of Portico: membership declares the node dead
	// and the new announcer's gratuitous ARP lands (docs/benchmarks.md, BenchmarkL2Failover: worst 746 ms
	// over 20 trials), rounded up to a second for a loaded machine. Requests on new
	// connections may fail for no longer than this across the switch.
	l2FailoverBound = time.Second

	// l2Held and bgpHeld are the held connections per layer-2 VIP and on the BGP VIP;
	// heldTimeout bounds each of their requests.
	l2Held, bgpHeld = 2, 4
	heldTimeout     = 3 * time.Second

	// Ports the agent takes while kube-proxy still runs on the node (kube-proxy holds 10256
	// and 10249, the agent's defaults).
	agentHealthzPort = 10266
	agentMetrics     = "127.0.0.1:10269"
)

// TestSwitchUnderTraffic is the switch from MetalLB to Portico replacing kube-proxy too
// ("Replacing kube-proxy too" in docs/migrate-metallb.md), under traffic, on a cluster of real kubelets that runs as MetalLB users run it:
// kube-proxy (iptables mode) on every node, MetalLB's controller and its speaker on every node
// (layer 2, native implementation, in the node's network namespace as its hostNetwork pod
// runs), echo pods behind LoadBalancer Services that a client on the LAN reaches. While the
// client opens new connections and holds others to every VIP, the switch runs: MetalLB's
// controller stops, `portico-controller migrate metallb` converts its configuration, the chart
// installs Portico (controller and agents: the agents announce and program the dataplane
// beside kube-proxy), MetalLB's speakers stop, kube-proxy stops and its rules are removed
// (kube-proxy --cleanup). Every Service keeps its addresses (a watch sees no status change),
// requests on new connections fail for no longer than one failover, and held connections are
// reset only where the path of their flow changed: none on a layer-2 VIP whose announcing node
// (the client's neighbour entry) did not move, at most one per held connection and move when it
// did; on the BGP VIP only while a node's path is out of the router or coming back (ECMP
// rehashes the flows: a flow moved to another node meets no conntrack entry there), at most
// one per held connection and path change.
func TestSwitchUnderTraffic(t *testing.T) { testSwitch(t, false) }

// TestSwitchKeepingKubeProxy is the switch of docs/migrate-metallb.md by its default path:
// Portico's agents run announce-only (agent.mode none, the mode's own health and metrics
// ports, no ignoreOtherProxy) and kube-proxy stays, programming every Service throughout. The
// cluster, the workload, the traffic, the steps up to the speakers' stop and the bounds are
// TestSwitchUnderTraffic's; there is no kube-proxy step.
func TestSwitchKeepingKubeProxy(t *testing.T) { testSwitch(t, true) }

// testSwitch runs the switch under traffic; with keepKubeProxy Portico announces only and
// kube-proxy stays, otherwise Portico's dataplane replaces kube-proxy at the end.
func testSwitch(t *testing.T, keepKubeProxy bool) {
	c := nodes.New(t, nodes.Options{Nodes: 3, Clients: 1, Router: true})
	ctx := t.Context()
	cs := c.Client()
	cp := c.ControlPlane
	client := c.Lab.Clients()[0]
	if _, err := client.Exec(ctx, "ip", "route", "add", switchOnLink, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	tag, err := install.DefaultTag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The images first, so that the switch's time is the switch's.
	if _, err := install.BuildImages(ctx, tag, t.Logf); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{metallbNS, "default"} {
		if err := cp.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.InstallCRDs(ctx, built.CRDDir); err != nil {
		t.Fatalf("installing MetalLB's CRDs: %v", err)
	}
	// Step 1 of the doc, done ahead: Portico's CRDs, which the command writes to.
	if err := cp.InstallCRDs(ctx, filepath.Join("..", "..", "..", "deploy", "crds")); err != nil {
		t.Fatalf("installing Portico's CRDs: %v", err)
	}
	if err := cp.Apply(ctx, filepath.Join("testdata", "switch.yaml")); err != nil {
		t.Fatal(err)
	}

	// The router: bird peering with every node, and a client behind it.
	rh := c.Lab.Router()
	var neighbors []router.Neighbor
	for _, n := range c.Nodes {
		neighbors = append(neighbors, router.Neighbor{Name: n.Name, Addr: n.Lab.Addr, ASN: nodeASN})
	}
	bird, err := router.Start(ctx, rh, t.TempDir(), router.Config{ASN: routerASN, Neighbors: neighbors, HashPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := router.AddOutside(ctx, c.Lab, rh, netip.MustParsePrefix(switchRouted))
	if err != nil {
		t.Fatal(err)
	}
	var nodeHosts []*netlab.Host
	var nodeAddrs []netip.Addr
	for _, n := range c.Nodes {
		nodeHosts, nodeAddrs = append(nodeHosts, &n.Lab.Host), append(nodeAddrs, n.Lab.Addr)
	}
	if err := outside.RouteBack(ctx, nodeHosts...); err != nil {
		t.Fatal(err)
	}
	bgpConfig := filepath.Join(t.TempDir(), "bgp.yaml")
	if err := os.WriteFile(bgpConfig, []byte(fmt.Sprintf(switchBGP, nodeASN, routerASN, rh.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cp.Apply(ctx, bgpConfig); err != nil {
		t.Fatal(err)
	}

	// The cluster as MetalLB users run it: kube-proxy on every node, MetalLB's controller and
	// a speaker on every node.
	bins, err := k8sbin.Ensure(ctx, k8sbin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kubeProxies := map[string]*process.Process{}
	for _, n := range c.Nodes {
		kubeProxies[n.Name] = inNode(t, n, "kube-proxy", bins.KubeProxy, kubeProxyArgs(n, cp.KubeconfigPath())...)
	}
	wait.For(t, time.Minute, "the default ServiceAccounts of "+metallbNS+" and default", func() error {
		for _, ns := range []string{metallbNS, "default"} {
			if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	env := append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath())
	pods := []*corev1.Pod{metallb.OwnPod(metallbNS, "metallb-controller")}
	for _, n := range c.Nodes {
		pods = append(pods, metallb.SpeakerPod(metallbNS, n.Name))
	}
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(metallbNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mlController := process.StartForTest(t, built.Controller, process.Options{
		Name: "metallb-controller",
		Args: metallb.ControllerArgs(metallbNS, "metallb-controller", ports.ForTest(t), ports.ForTest(t)),
		Env:  env,
	})
	speakers := map[string]*process.Process{}
	for _, n := range c.Nodes {
		speakers[n.Name] = inNodeEnv(t, n, "metallb-speaker", built.Speaker, env,
			metallb.SpeakerArgs(metallbNS, "metallb-speaker-"+n.Name, n.Name, 9120, 9121)...)
	}
	dumps := []func() string{mlController.LogTail}
	for _, n := range c.Nodes {
		dumps = append(dumps, speakers[n.Name].LogTail, kubeProxies[n.Name].LogTail)
	}

	// The workload: three echo pods, one per node, behind four Services: auto-assigned, pinned,
	// and two sharing one address on two ports.
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, c.EchoDeployment(3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := services.Helper{TB: t, CS: cs, Namespace: "default", Timeout: 2 * time.Minute, Dumps: dumps}
	echo := func(port int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "echo"}
			s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: port, TargetPort: intstr.FromInt32(nodes.EchoPort), Protocol: corev1.ProtocolTCP}}
		}
	}
	ann := func(kv ...string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			for i := 0; i+1 < len(kv); i += 2 {
				s.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	shared := ann("metallb.io/allow-shared-ip", "web", "metallb.io/loadBalancerIPs", "198.18.222.25")
	svcs := []*corev1.Service{
		h.LoadBalancer("auto", echo(nodes.EchoPort)),
		h.LoadBalancer("pinned", echo(nodes.EchoPort), ann("metallb.io/loadBalancerIPs", switchPinned)),
		h.LoadBalancer("web", echo(nodes.EchoPort), shared),
		h.LoadBalancer("web-alt", echo(nodes.EchoPort+1), shared),
		h.LoadBalancer("routed", echo(nodes.EchoPort), ann("metallb.io/address-pool", "routed")),
	}
	for _, s := range svcs {
		h.Create(s)
	}
	before := map[string]corev1.LoadBalancerStatus{}
	var targets []netip.AddrPort
	for _, s := range svcs {
		got := h.Wait(s.Name, "an address from MetalLB", func(svc *corev1.Service) string {
			if len(svc.Status.LoadBalancer.Ingress) != 1 {
				return fmt.Sprintf("ingress %+v", svc.Status.LoadBalancer.Ingress)
			}
			return ""
		})
		before[s.Name] = got.Status.LoadBalancer
		targets = append(targets, netip.AddrPortFrom(netip.MustParseAddr(got.Status.LoadBalancer.Ingress[0].IP), uint16(got.Spec.Ports[0].Port)))
	}
	t.Logf("MetalLB %s allocated: %s", metallb.Version, describe(before))
	// The last Service is routed: the client behind the router reaches it.
	routed := targets[len(targets)-1]
	targets = targets[:len(targets)-1]
	routedPrefix := netip.PrefixFrom(routed.Addr(), 32)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if out, err := bird.WaitNextHops(rctx, routedPrefix, nodeAddrs); err != nil {
		t.Fatalf("MetalLB's routes: %v\n%s\n%s", err, out, dumpAll(dumps))
	}
	cancel()
	for i, target := range append(slices.Clone(targets), routed) {
		from := client
		if i == len(targets) {
			from = &outside.Host
		}
		err := wait.Poll(ctx, 100*time.Millisecond, 2*time.Minute, from.Name+" served through "+target.String()+" (MetalLB's announcement, kube-proxy's rules)", func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := from.Request(rctx, "tcp", target)
			return err
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, dumpAll(dumps))
		}
	}
	macs, err := c.MACs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the switch, the client reaches: %s", announcers(t, client, targets, macs))

	rec := watchStatus(t, cs, "default", before)
	var vips []netip.Addr
	for _, tg := range targets {
		if !slices.Contains(vips, tg.Addr()) {
			vips = append(vips, tg.Addr())
		}
	}
	arp := netlab.WatchNeighbours(t, client.NS, vips, 50*time.Millisecond)
	var loads []*traffic.Load
	for _, target := range targets {
		loads = append(loads, traffic.Start(t, client, target, traffic.Options{Held: l2Held, Timeout: heldTimeout, TolerateFailures: true}))
	}
	loads = append(loads, traffic.Start(t, &outside.Host, routed, traffic.Options{Held: bgpHeld, Timeout: heldTimeout, TolerateFailures: true}))
	allTargets := append(slices.Clone(targets), routed)
	flowing := func(what string) {
		t.Helper()
		for i, l := range loads {
			l.WaitRounds(t, 5, fmt.Sprintf("traffic to %s flowing %s", allTargets[i], what))
		}
	}
	flowing("before the switch")
	began := time.Now()
	steps := []string{}
	step := func(what string, since time.Time) {
		steps = append(steps, fmt.Sprintf("%s: %s %s", since.Format("15:04:05.000"), what, time.Since(since).Round(time.Millisecond)))
	}

	// Steps 3-4 of the doc: MetalLB's controller stops, the command converts and writes.
	at := time.Now()
	if err := mlController.Stop(process.DefaultGrace); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Logf("stopping MetalLB's controller: %v", err)
	}
	out, err := migrate("--kubeconfig=" + cp.KubeconfigPath())
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Logf("migrate metallb:\n%s", out)
	if !strings.Contains(out, "5 keep their addresses") {
		t.Fatalf("the command does not say every Service keeps its address:\n%s", out)
	}
	step("controller stopped and migrate", at)

	// Step 5: Portico from its chart: the controller for class-less Services, the agents
	// announcing by ARP and BGP. Replacing kube-proxy, they program the Services beside it
	// until it goes (other health and metrics ports meanwhile, and ignoreOtherProxy:
	// kube-proxy's rules are there); keeping it, they announce only (agent.mode none, whose
	// default ports are not kube-proxy's).
	at = time.Now()
	opts := install.Options{Tag: tag, Classless: true, Announce: []string{"l2", "bgp"}, Values: map[string]any{
		"agent": map[string]any{"healthzPort": agentHealthzPort, "metricsBindAddress": agentMetrics, "ignoreOtherProxy": true},
	}}
	if keepKubeProxy {
		opts.ProxyMode, opts.Values = "none", nil
	}
	install.Must(t, c, opts)
	for _, s := range svcs {
		h.Wait(s.Name, "Portico's Ready condition", porticoReady)
		if s.Name != "routed" {
			h.WaitEvent(s.Name, l2.ReasonAnnouncing, "")
		}
	}
	step("helm install, agents announcing", at)
	flowing("with MetalLB's speakers and Portico's agents both announcing")

	// Step 6: MetalLB's speakers go, one node at a time: the router holds one session per
	// node, MetalLB's until its speaker stops; the node's path comes back when the agent's
	// session is up and its route in the router's kernel.
	var pathChanges []pathWindow
	for _, n := range c.Nodes {
		metallbSession := session(t, bird, n.Name)
		at = time.Now()
		if err := speakers[n.Name].Stop(process.DefaultGrace); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Logf("stopping the speaker on %s: %v", n.Name, err)
		}
		wait.For(t, time.Minute, "a new session from "+n.Name+" (the agent's) established", func() error {
			if now := session(t, bird, n.Name); now == metallbSession || !strings.Contains(now, "Established") {
				return fmt.Errorf("bird: %s (MetalLB's: %s)", now, metallbSession)
			}
			return nil
		})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		if out, err := bird.WaitNextHops(rctx, routedPrefix, nodeAddrs); err != nil {
			cancel()
			t.Fatalf("Portico's route from %s: %v\n%s", n.Name, err, out)
		}
		cancel()
		pathChanges = append(pathChanges, pathWindow{node: n.Name, from: at, to: time.Now()})
		step("speaker on "+n.Name+" stopped, the agent's session and route in", at)
	}
	flowing("after MetalLB's speakers stopped")

	// Step 7, replacing kube-proxy: it goes, and its rules with it.
	if !keepKubeProxy {
		at = time.Now()
		for _, n := range c.Nodes {
			if err := kubeProxies[n.Name].Stop(process.DefaultGrace); err != nil && !strings.Contains(err.Error(), "signal") {
				t.Logf("stopping kube-proxy on %s: %v", n.Name, err)
			}
			cleaned := time.Now()
			if out, err := n.Lab.Exec(ctx, bins.KubeProxy, "--cleanup"); err != nil {
				t.Fatalf("kube-proxy --cleanup on %s: %v\n%s", n.Name, err, out)
			}
			step("kube-proxy --cleanup on "+n.Name, cleaned)
		}
		step("kube-proxy stopped and cleaned up", at)
		flowing("after kube-proxy left")
	}
	if keepKubeProxy {
		// kube-proxy served throughout and still does; the agents programmed no Service rule.
		for _, n := range c.Nodes {
			if kubeProxies[n.Name].Exited() {
				t.Errorf("kube-proxy on %s exited: %v", n.Name, kubeProxies[n.Name].Err())
			}
			if found := switchPorticoRules(t, n); len(found) > 0 {
				t.Errorf("announce-only agents left rules on %s: %v", n.Name, found)
			}
		}
	}
	t.Logf("after the switch, the client reaches: %s", announcers(t, client, targets, macs))
	if hops, err := bird.NextHops(ctx, routedPrefix); err == nil {
		t.Logf("after the switch, the router's next hops for %s: %v", routedPrefix, hops)
	}

	// Every Service keeps its address, and was served throughout.
	changes, events := rec.stop()
	for _, ch := range changes {
		t.Errorf("status changed across the switch: %s", ch)
	}
	results := make([]traffic.Result, len(loads))
	for i, l := range loads {
		results[i] = l.Stop()
	}
	neigh := arp.Stop()
	var failedNew, newRequests, resets, served int
	var longest time.Duration
	for i, res := range results {
		failedNew += res.FailedNew
		newRequests += res.NewRequests
		resets += len(res.Resets)
		served += int(res.OK)
		longest = max(longest, res.LongestFailure)
		t.Logf("%s: %d served (%d on held connections), %d of %d new connections failed (longest window %s), slowest new %s, %d held connections reset",
			allTargets[i], res.OK, res.OnHeld, res.FailedNew, res.NewRequests, res.LongestFailure.Round(time.Millisecond), res.SlowestNew.Round(time.Millisecond), len(res.Resets))
		for _, f := range res.Failed {
			t.Logf("  failed: %s", f)
		}
		for _, r := range res.Resets {
			t.Logf("  reset: %s", r)
		}
		if res.LongestFailure > l2FailoverBound {
			t.Errorf("%s: new connections failed for %s in a row (from %s), more than one failover (%s)",
				allTargets[i], res.LongestFailure.Round(time.Millisecond), res.LongestFailureAt.Format("15:04:05.000"), l2FailoverBound)
		}
	}
	// The held connections' bound. Layer 2: a held connection's packets reach the node the
	// client's neighbour entry names, which has its conntrack entry whichever proxy created
	// it; only a move of that entry breaks it (once per connection and move).
	for i, tg := range targets {
		moved := neighbourMoves(neigh, tg.Addr())
		if bound := l2Held * len(moved); len(results[i].Resets) > bound {
			t.Errorf("%s: %d held connections reset; at most %d (%d held x %d moves of the client's neighbour entry: %v)",
				tg, len(results[i].Resets), bound, l2Held, len(moved), moved)
		}
	}
	// BGP: each node's speaker-to-agent handover removes its path from the router and adds
	// it back; each change may move each held flow to another node once.
	bgpRes := results[len(results)-1]
	if bound := bgpHeld * 2 * len(pathChanges); len(bgpRes.Resets) > bound {
		t.Errorf("%s: %d held connections reset; at most %d (%d held x %d path changes)", routed, len(bgpRes.Resets), bound, bgpHeld, 2*len(pathChanges))
	}
	for j, at := range bgpRes.ResetAt {
		if !slices.ContainsFunc(pathChanges, func(w pathWindow) bool { return w.holds(at) }) {
			t.Errorf("%s: held connection reset outside every node's path change (%s): %s", routed, describeWindows(pathChanges), bgpRes.Resets[j])
		}
	}
	t.Logf("switch (%s): %s", time.Since(began).Round(time.Millisecond), strings.Join(steps, "; "))
	var moves []string
	for _, ch := range neigh {
		who := "none"
		if ch.MAC != "" {
			who = macs[ch.MAC]
		}
		moves = append(moves, fmt.Sprintf("%s %s -> %s", ch.At.Format("15:04:05.000"), ch.Addr, who))
	}
	t.Logf("the client's neighbour entries for the VIPs: %s", strings.Join(moves, "; "))
	t.Logf("across the switch: %d Services, %d status.loadBalancer changes (%d watch events); %d requests served; %d of %d new connections failed, longest failed window %s; %d held connections reset (%d on the layer-2 VIPs, %d on the BGP VIP)",
		len(before), len(changes), events, served, failedNew, newRequests, longest.Round(time.Millisecond), resets, resets-len(bgpRes.Resets), len(bgpRes.Resets))
}

// pathWindow is one node's BGP handover: from its speaker's stop until the router's kernel had
// its path again (the agent's route).
type pathWindow struct {
	node     string
	from, to time.Time
}

// holds reports whether a held connection that broke at t broke from this handover: within it,
// or up to one held request's timeout (a moved flow whose packets are dropped rather than
// reset) and a second after the path came back.
func (w pathWindow) holds(t time.Time) bool {
	return !t.Before(w.from) && !t.After(w.to.Add(heldTimeout+time.Second))
}

func describeWindows(ws []pathWindow) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s %s-%s", w.node, w.from.Format("15:04:05.000"), w.to.Format("15:04:05.000")))
	}
	return strings.Join(parts, ", ")
}

// neighbourMoves lists the moves of addr's neighbour entry in changes: each time it named a
// MAC other than the last one it named (an entry that went and came back to the same MAC did
// not move).
func neighbourMoves(changes []netlab.NeighbourChange, addr netip.Addr) []string {
	var out []string
	last := ""
	for _, c := range changes {
		if c.Addr != addr || c.MAC == "" {
			continue
		}
		if last != "" && c.MAC != last {
			out = append(out, c.At.Format("15:04:05.000")+" "+c.MAC)
		}
		last = c.MAC
	}
	return out
}

// kubeProxyArgs run kube-proxy on node n as a kubeadm cluster does in substance (iptables
// mode, the node's name, the node's pod CIDR as the local traffic), keeping the node's conntrack settings (the nodes
// are network namespaces of one machine: nf_conntrack_max is not theirs to set).
func kubeProxyArgs(n *nodes.Node, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=iptables", "--hostname-override=" + n.Name, "--detect-local-mode=NodeCIDR",
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
	}
}

// inNode starts bin in node n's network namespace (as a hostNetwork pod runs), stopped at the
// end of the test.
func inNode(t *testing.T, n *nodes.Node, name, bin string, args ...string) *process.Process {
	return inNodeEnv(t, n, name, bin, nil, args...)
}

func inNodeEnv(t *testing.T, n *nodes.Node, name, bin string, env []string, args ...string) *process.Process {
	t.Helper()
	return process.StartForTest(t, "nsenter", process.Options{
		Name: n.Name + "-" + name,
		Args: append([]string{"--net=" + filepath.Join("/run/netns", n.Lab.NS), "--", bin}, args...),
		Env:  env,
	})
}

// announcers says which node the client's neighbour table sends each target's VIP to.
func announcers(t *testing.T, client interface {
	Exec(context.Context, string, ...string) ([]byte, error)
}, targets []netip.AddrPort, macs map[string]string) string {
	var parts []string
	seen := map[netip.Addr]bool{}
	for _, tg := range targets {
		if seen[tg.Addr()] {
			continue
		}
		seen[tg.Addr()] = true
		out, err := client.Exec(t.Context(), "ip", "neigh", "show", tg.Addr().String())
		who := strings.TrimSpace(string(out))
		if err == nil {
			for mac, name := range macs {
				if strings.Contains(who, mac) {
					who = name
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s via %s", tg.Addr(), who))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func dumpAll(dumps []func() string) string {
	var b strings.Builder
	for _, d := range dumps {
		b.WriteString(d())
		b.WriteString("\n")
	}
	return b.String()
}

// switchBGP is MetalLB's BGP configuration of the test (node ASN, router ASN, router
// address): a pool only Services that name it use, advertised to the router.
const switchBGP = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: routed, namespace: metallb-system}
spec:
  addresses: [198.18.223.16/28]
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed, namespace: metallb-system}
spec:
  ipAddressPools: [routed]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec:
  myASN: %d
  peerASN: %d
  peerAddress: %s
`

// session is bird's line for the session with node (`birdc show protocols NAME`: state, since
// when, BGP state): it changes when the session goes down and when another one comes up.
func session(t *testing.T, b *router.Bird, node string) string {
	t.Helper()
	out, err := b.Birdc(t.Context(), "show", "protocols", node)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == node {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("bird has no protocol %s:\n%s", node, out)
	return ""
}

// switchPorticoRules lists what n's kernel holds of Portico's Service rules: its nftables table
// in either family, its iptables chains (prefix PTC-) in either family.
func switchPorticoRules(t *testing.T, n *nodes.Node) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var found []string
	for _, fam := range []string{"ip", "ip6"} {
		if _, err := n.Lab.Exec(ctx, "nft", "list", "table", fam, nftables.TableName); err == nil {
			found = append(found, "nftables table "+fam+" "+nftables.TableName)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := n.Lab.Exec(ctx, save)
		if err != nil {
			t.Fatalf("%s on %s: %v", save, n.Name, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, ":"+rules.Prefix) {
				found = append(found, save+": "+line)
			}
		}
	}
	return found
}
