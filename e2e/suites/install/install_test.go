package install

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/traffic"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

const (
	// pool is the AddressPool's addresses, inside the range test clusters keep for load
	// balancers; onLink is the client's on-link route for them (it resolves VIPs by ARP).
	pool   = "198.18.221.0/28"
	onLink = "198.18.221.0/24"
)

// TestInstall is the install story: helm install on a cluster without kube-proxy, a
// LoadBalancer Service reached from the LAN, helm upgrade under traffic, a node joining after
// the install, helm uninstall leaving nothing on any node.
func TestInstall(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 3, Spare: 1, DNS: true, Clients: 1})
	ctx := t.Context()
	cs := c.Client()
	t.Logf("cluster of %d nodes with CoreDNS started in %s", len(c.Nodes), c.Started.Round(time.Millisecond))
	client := c.Lab.Clients()[0]
	if _, err := client.Exec(ctx, "ip", "route", "add", onLink, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}

	// The images first (built once per source version, then found in the cache), so that the
	// install time below is the install's.
	tag, err := install.DefaultTag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	if _, err := install.BuildImages(ctx, tag, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("images %s built or found in %s", tag, time.Since(built).Round(time.Millisecond))

	// A user's workload, before Portico: three echo pods, a LoadBalancer Service that stays
	// pending, as no load-balancer controller runs yet.
	svcs, pods := echoWorkload(t, c)

	// helm install, no kube-proxy anywhere: the agent is the service proxy.
	begin := time.Now()
	r := install.Must(t, c, install.Options{Tag: tag, Pool: netip.MustParsePrefix(pool)})
	t.Logf("helm install to release ready (images imported, agents Ready on 3 nodes, controller available): %s", time.Since(begin).Round(time.Millisecond))

	svc, vip := waitVIP(t, svcs, netip.MustParsePrefix(pool))
	target := netip.AddrPortFrom(vip, nodes.EchoPort)
	reply := firstReply(t, client, target, "the client on the LAN")
	firstServed := time.Since(begin)
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == reply.Server }) {
		t.Errorf("the VIP was answered by %q, not an echo pod", reply.Server)
	}
	t.Logf("install to the first request served through the VIP %s (answered by %s): %s", vip, reply.Server, firstServed.Round(time.Millisecond))
	rss, err := c.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resident memory of the whole cluster (control plane, 3 nodes, CoreDNS, 3 echo pods, Portico: 3 agents, 2 controllers): %d MiB", rss>>20)

	t.Run("ClusterIP", func(t *testing.T) { clusterIPs(t, c, pods, svc) })
	for _, n := range c.Nodes {
		if left := portico(t, n); len(left) == 0 {
			t.Fatalf("%s: no rules of the agent found (iptables-save has no %s chain): is the agent programming it?", n.Name, rules.Prefix)
		}
	}

	t.Run("upgrade under traffic", func(t *testing.T) {
		next := tag + "-next"
		// The agents' logs from now on: what they saw of each other while the new images were
		// imported, and during the upgrade.
		oldLogs := followAgentLogs(t, cs, r.Namespace)
		// The new images first, built and imported on every node, so that the traffic and the
		// watch below span the rollout alone: importing them on all three nodes at once is
		// this harness's doing (a kubelet pulls an image when it starts the pod, on its node
		// only).
		if err := r.Stage(ctx, next); err != nil {
			t.Fatal(err)
		}
		watched := time.Now()
		load := traffic.Start(t, client, target, traffic.Options{Held: 4})
		load.WaitRounds(t, 5, "traffic flowing before the upgrade")
		// The node answering ARP for the VIP, and every MAC the client resolves it to during
		// the upgrade: replacing the agents must not move the VIP.
		neigh := netlab.WatchNeighbours(t, client.NS, []netip.Addr{vip}, 10*time.Millisecond)
		upgraded := time.Now()
		if err := r.Upgrade(ctx, next, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("helm upgrade to %s, every agent and controller replaced and Ready: %s", next, time.Since(upgraded).Round(time.Millisecond))
		load.WaitRounds(t, 5, "traffic flowing after the upgrade")
		macs := netlab.MACs(neigh.Stop(), vip)
		res := load.Stop()
		ok, onHeld, failed, resets := res.OK, res.OnHeld, res.Failed, res.Resets
		t.Logf("during the upgrade: %d requests served (%d over held connections, %d on new connections); %d new connections failed; %d held connections reset; the client resolved the VIP to %v",
			ok, onHeld, ok-onHeld, len(failed), len(resets), macs)
		if len(failed) > 0 {
			t.Errorf("%d requests on new connections failed during the upgrade, e.g. %s", len(failed), strings.Join(failed[:min(5, len(failed))], "; "))
		}
		// The agents restart in place: each tells the others to hold its node
		// (membership.restartHold), the rules stay in the kernel, so the VIP stays on its node
		// and held connections keep their conntrack entries there.
		if len(resets) > 0 {
			t.Errorf("%d held connections reset during the upgrade, e.g. %s", len(resets), strings.Join(resets[:min(5, len(resets))], "; "))
		}
		if len(macs) != 1 {
			names, err := c.MACs()
			t.Errorf("the VIP moved between nodes during the upgrade: the client resolved it to %v (node MACs: %v, %v)", macs, names, err)
		}
		// What the agents, old and new, saw of the others' restarts (holds, returns, takeovers)
		// and of their failures ("alive=false": declared dead), from before the new images were
		// imported on.
		words := []string{"Membership", "Announcing VIP", "Withdrawing VIP", "VIPs again", "Started membership", "Stopped"}
		t.Logf("the watched window began at %s", watched.Format("15:04:05.000"))
		for pod, lines := range oldLogs() {
			t.Logf("replaced agent %s:\n%s", pod, strings.Join(grep(lines, words), "\n"))
		}
		agentLog(t, cs, r.Namespace, words...)
		after := svcs.Get("echo")
		if got := after.Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != vip.String() {
			t.Errorf("the VIP changed in the upgrade: ingress %+v, was %s", got, vip)
		}
	})

	t.Run("node added after install", func(t *testing.T) { lateNode(t, c, r) })

	t.Run("uninstall leaves nothing", func(t *testing.T) {
		svcs.Delete("echo")
		svcs.WaitGone("echo")
		agentLogs := followAgentLogs(t, c.Client(), r.Namespace)
		uninstalled := time.Now()
		if err := r.Uninstall(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Gone(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("helm uninstall (objects and pods gone) on %d nodes: %s", len(c.Nodes), time.Since(uninstalled).Round(time.Millisecond))
		leftRules(t, c, agentLogs())
		// No node answers ARP for the VIP any more: arping gets no reply.
		if out, err := client.Exec(ctx, "arping", "-c", "3", "-w", "3", "-I", "eth0", vip.String()); err == nil {
			t.Errorf("a node still answers ARP for %s after uninstall:\n%s", vip, out)
		}
		leftovers(t, c, r)
	})
}

// lateNode adds a node to the running cluster after the install (and the upgrade, so that
// nothing rendered at install or upgrade time knows it) with the agent's image on it, as a
// node that pulls it: the agent DaemonSet's pod there becomes Ready and programs the node.
// The uninstall that follows must clean it like the others.
func lateNode(t *testing.T, c *nodes.Cluster, r *install.Release) *nodes.Node {
	t.Helper()
	ctx := t.Context()
	added := time.Now()
	n, err := c.AddNode(ctx, r.Images.Archives["portico-agent"])
	if err != nil {
		t.Fatal(err)
	}
	joined := time.Since(added)
	if err := r.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the agent's rules on "+n.Name, func() error {
		if len(portico(t, n)) == 0 {
			return fmt.Errorf("no %s chain or %s table on %s", rules.Prefix, nftables.TableName, n.Name)
		}
		return nil
	})
	t.Logf("%s joined the cluster (Ready) in %s; its agent Ready and its rules in place %s after it was added", n.Name, joined.Round(time.Millisecond), time.Since(added).Round(time.Millisecond))
	return n
}

// clusterIPs: the agents made ClusterIPs work without kube-proxy: CoreDNS answers through the
// kube-dns ClusterIP from a node (UDP and TCP), and a pod reaches the echo Service's ClusterIP.
func clusterIPs(t *testing.T, c *nodes.Cluster, pods []corev1.Pod, svc *corev1.Service) {
	ctx := t.Context()
	from := c.Nodes[0]
	name := "echo.default.svc." + nodes.DNSDomain + "."
	for _, proto := range []string{"udp", "tcp"} {
		resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if proto == "tcp" {
				return from.Lab.DialTCP(ctx, netip.AddrPortFrom(nodes.DNSServiceIP, 53))
			}
			return from.Lab.DialUDP(ctx, netip.AddrPortFrom(nodes.DNSServiceIP, 53))
		}}
		var got []string
		wait.For(t, time.Minute, "CoreDNS through the kube-dns ClusterIP over "+proto+" to answer "+name, func() error {
			var err error
			got, err = resolver.LookupHost(ctx, name)
			return err
		})
		if !slices.Equal(got, []string{svc.Spec.ClusterIP}) {
			t.Errorf("kube-dns ClusterIP %s over %s answers %s with %v, want [%s]", nodes.DNSServiceIP, proto, name, got, svc.Spec.ClusterIP)
		}
	}
	pod := pods[0]
	stdout, stderr, err := c.Exec(ctx, pod, "/echoserver", "-dial", net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(nodes.EchoPort)))
	if err != nil {
		t.Fatalf("pod %s dialling ClusterIP %s: %v (%s)", pod.Name, svc.Spec.ClusterIP, err, stderr)
	}
	reply, err := netlab.ParseReply(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == reply.Server }) {
		t.Errorf("pod %s dialled the ClusterIP and got %q, not an echo pod", pod.Name, reply.Server)
	}
}

// portico lists what the agent owns in node n's network namespace: iptables chains named with
// rules.Prefix (both families) and the nftables table nftables.TableName.
func portico(t *testing.T, n *nodes.Node) []string {
	t.Helper()
	var found []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := n.Lab.Exec(t.Context(), save)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, rules.Prefix) {
				found = append(found, save+": "+line)
			}
		}
	}
	out, err := n.Lab.Exec(t.Context(), "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == nftables.TableName {
			found = append(found, "nft: "+line)
		}
	}
	return found
}

// leftRules: no node, the added one too, keeps a chain or table of the agent. It logs what
// each agent decided as it stopped (logs: followAgentLogs from before the uninstall), and on
// a node with rules left the end of that agent's log.
func leftRules(t *testing.T, c *nodes.Cluster, logs map[string][]string) {
	t.Helper()
	for pod, lines := range logs {
		t.Logf("agent %s at uninstall:\n%s", pod, strings.Join(grep(lines, uninstallWords), "\n"))
	}
	var counts []string
	for _, n := range c.Nodes {
		left := portico(t, n)
		counts = append(counts, fmt.Sprintf("%s %d", n.Name, len(left)))
		if len(left) == 0 {
			continue
		}
		t.Errorf("%s: left behind after uninstall:\n%s", n.Name, strings.Join(left, "\n"))
		for pod, lines := range logs {
			if strings.HasSuffix(pod, " on "+n.Name) {
				t.Logf("the end of agent %s's log:\n%s", pod, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	}
	t.Logf("agent chains and tables left per node after uninstall: %s", strings.Join(counts, ", "))
}

// uninstallWords pick an agent's log lines about how it stopped (nodeproxy/uninstall.go).
var uninstallWords = []string{"DaemonSet", "uninstall", "Uninstall", "Stopped", "removing the rules", "signal"}

// leftovers: no object of the release stays: pods, the agent's and controller's workloads,
// ConfigMaps, the membership Secret, Helm's release Secrets, Jobs, RBAC.
func leftovers(t *testing.T, c *nodes.Cluster, r *install.Release) {
	ctx := t.Context()
	cs := c.Client()
	var left []string
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=portico"}
	if l, err := cs.AppsV1().DaemonSets(r.Namespace).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			left = append(left, "DaemonSet/"+o.Name)
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.AppsV1().Deployments(r.Namespace).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			left = append(left, "Deployment/"+o.Name)
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.BatchV1().Jobs(r.Namespace).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			left = append(left, "Job/"+o.Name)
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.CoreV1().ConfigMaps(r.Namespace).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			left = append(left, "ConfigMap/"+o.Name)
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.CoreV1().Secrets(r.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) || strings.HasPrefix(o.Name, "sh.helm.release.v1."+r.Name+".") {
				left = append(left, "Secret/"+o.Name)
			}
		}
	} else {
		t.Fatal(err)
	}
	// The controller's leader-election Lease: owned by its Deployment, it goes with it.
	if l, err := cs.CoordinationV1().Leases(r.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "Lease/"+o.Name)
			}
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ClusterRole/"+o.Name)
			}
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ClusterRoleBinding/"+o.Name)
			}
		}
	} else {
		t.Fatal(err)
	}
	if l, err := cs.CoreV1().ServiceAccounts(r.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ServiceAccount/"+o.Name)
			}
		}
	} else {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("helm uninstall left objects behind: %s", strings.Join(left, ", "))
	}
}

// ours tells the chart's object names (portico-...) from the test cluster's own
// (portico-e2e:..., e2e/framework/nodes' CoreDNS RBAC).
func ours(name string) bool {
	return strings.HasPrefix(name, "portico") && !strings.HasPrefix(name, "portico-e2e:")
}

// agentLog logs the lines of every agent pod's log that contain one of words.
func agentLog(t *testing.T, cs kubernetes.Interface, ns string, words ...string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=portico-agent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
		if err != nil {
			t.Errorf("logs of %s: %v", p.Name, err)
			continue
		}
		t.Logf("agent %s on %s:\n%s", p.Name, p.Spec.NodeName, strings.Join(grep(strings.Split(string(b), "\n"), words), "\n"))
	}
}

// grep returns the lines that contain one of words.
func grep(lines, words []string) []string {
	var keep []string
	for _, line := range lines {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			keep = append(keep, line)
		}
	}
	return keep
}

// followAgentLogs streams the logs of the agent pods running now until they end (a pod
// replaced takes its log with it); the returned function gives the lines so far per pod.
func followAgentLogs(t *testing.T, cs kubernetes.Interface, ns string) func() map[string][]string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=portico-agent"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	logs := map[string][]string{}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, p := range pods.Items {
		key := p.Name + " on " + p.Spec.NodeName
		wg.Go(func() {
			rc, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
			if err != nil {
				return
			}
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			for sc.Scan() {
				mu.Lock()
				logs[key] = append(logs[key], sc.Text())
				mu.Unlock()
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() map[string][]string {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]string{}
		for k, v := range logs {
			out[k] = slices.Clone(v)
		}
		return out
	}
}
