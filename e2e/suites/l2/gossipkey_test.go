package l2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/traffic"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

const (
	keyNS     = "portico-system"
	keySecret = "portico-membership"
	keyPool   = "198.18.221.0/28"
	keyOnLink = "198.18.221.0/24"
	keyVIP    = "198.18.221.5"
)

// keyLab is TestL2GossipKey's own lab (four nodes, one client), control plane and controller:
// its agents start with a key Secret that does not exist yet, which the shared agents of the
// suite cannot.
type keyLab struct {
	env    *labcluster.Env
	agents map[string]*netlab.Process
	macs   map[string]string
}

// TestL2GossipKey (issue 30, item 4): the agents' membership key is made at runtime and
// rotates without a restart, a membership change or a VIP move.
//
//   - Three agents start together with --membership-secret naming a Secret that does not
//     exist and --membership-create-secret: exactly one of them creates it (one Create; the
//     others get AlreadyExists and read the winner's), all three hold the same key and form one
//     membership.
//   - Under traffic to a VIP (held connections and a new connection per request), the key is
//     rotated by editing the Secret in the documented three steps (add the new key as
//     "secret-next"; make it "secret" and keep the old as "secret-old"; remove "secret-old"),
//     waiting after each step for every agent's portico_agent_membership_keys to show it: no
//     request fails, no held connection breaks, no agent's view changes, no agent announces a
//     VIP, the client's neighbour entry of the VIP stays on its owner, and no message fails to
//     decrypt.
//   - An agent on a fourth node given another key (--membership-secret-file) cannot join: it
//     and the three count decryption failures in portico_agent_membership_decrypt_failures_total
//     and report MembershipDecryptFailed Events on their Nodes; the three stay one membership.
func TestL2GossipKey(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	kl := startKeyLab(ctx, t)
	nodes := kl.env.Lab.Nodes()
	members := nodes[:3]

	// 1. A fresh install: no Secret; the three agents start at once.
	if _, err := kl.env.CS.CoreV1().Secrets(keyNS).Get(ctx, keySecret, metav1.GetOptions{}); err == nil {
		t.Fatal("the Secret exists before any agent ran")
	}
	var wg sync.WaitGroup
	for _, n := range members {
		p, err := n.Start(kl.env.Agent, kl.agentArgs(n, "--announce=l2", "--membership-secret="+keyNS+"/"+keySecret, "--membership-create-secret")...)
		if err != nil {
			t.Fatal(err)
		}
		kl.agents[n.Name] = p
		t.Cleanup(func() { _ = p.Stop() })
	}
	for _, n := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
			defer wcancel()
			if err := kl.agents[n.Name].WaitFor(wctx, `"Synced"`); err != nil {
				t.Errorf("%s: %v\n%s", n.Name, err, tail(kl.agents[n.Name].Output(), 30))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	secret, err := kl.env.CS.CoreV1().Secrets(keyNS).Get(ctx, keySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no agent created the Secret: %v", err)
	}
	var creators []string
	for _, n := range members {
		if strings.Contains(kl.agents[n.Name].Output(), "Created the membership Secret") {
			creators = append(creators, n.Name)
		}
	}
	t.Logf("Secret created by %v (annotation %q)", creators, secret.Annotations["portico-lb.io/created-by"])
	if len(creators) != 1 {
		t.Errorf("%d agents created the Secret (%v), want exactly 1", len(creators), creators)
	}
	oldValue := secret.Data["secret"]
	oldFP := keyFingerprint(oldValue)
	for _, n := range members {
		kl.waitMetrics(t, n, 20*time.Second, keyLine(oldFP, true), `portico_agent_membership_nodes{state="alive"} 3`)
	}

	// 2. A VIP under traffic, and its owner.
	svc := services.LoadBalancer(keyNS, "web", func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = keyVIP
		s.Spec.Selector = map[string]string{"app": "web"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: echoPort, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP}}
	})
	h := services.Helper{TB: t, CS: kl.env.CS, Namespace: keyNS, Timeout: 30 * time.Second}
	h.CreateTemp(svc)
	vip := netip.MustParseAddr(keyVIP)
	h.Wait("web", "ingress "+keyVIP, services.HasIngressIPs(vip))
	client := kl.env.Lab.Clients()[0]
	load := traffic.Start(t, client, netip.AddrPortFrom(vip, echoPort), traffic.Options{Held: 2, Pace: 50 * time.Millisecond})
	load.WaitRounds(t, 5, "traffic to the VIP flowing")
	nh := hostHandle(t, client)
	ownerMAC := netlab.Neighbour(nh, vip).String()
	owner := kl.nodeOfMAC(ownerMAC)
	if owner == "" {
		t.Fatalf("the client's neighbour entry of %s is %q, no node's", vip, ownerMAC)
	}
	t.Logf("%s is announced by %s", vip, owner)
	before := map[string]string{}
	for _, n := range members {
		before[n.Name] = kl.metrics(t, n)
	}
	announced := kl.count(`"Announcing VIP"`)
	watch := kl.watchNeighbour(nh, vip, ownerMAC)

	// 3. The rotation, one step at a time, each awaited on every agent.
	newValue := []byte("rotated-" + time.Now().Format(time.RFC3339Nano))
	newFP := keyFingerprint(newValue)
	steps := []struct {
		name string
		data map[string][]byte
		want []string
	}{
		{"add the new key as secret-next", map[string][]byte{"secret": oldValue, "secret-next": newValue}, []string{keyLine(oldFP, true), keyLine(newFP, false)}},
		{"make it secret, the old one secret-old", map[string][]byte{"secret": newValue, "secret-old": oldValue}, []string{keyLine(newFP, true), keyLine(oldFP, false)}},
		{"remove secret-old", map[string][]byte{"secret": newValue}, []string{keyLine(newFP, true)}},
	}
	for _, st := range steps {
		begin := time.Now()
		s, err := kl.env.CS.CoreV1().Secrets(keyNS).Get(ctx, keySecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = st.data
		if _, err := kl.env.CS.CoreV1().Secrets(keyNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for _, n := range members {
			kl.waitMetrics(t, n, 20*time.Second, st.want...)
		}
		t.Logf("%s: every agent holds it after %v", st.name, time.Since(begin).Round(time.Millisecond))
		load.WaitRounds(t, 5, "traffic after: "+st.name)
	}
	for _, n := range members {
		m := kl.metrics(t, n)
		if strings.Contains(m, keyLine(oldFP, false)) || strings.Contains(m, keyLine(oldFP, true)) {
			t.Errorf("%s still holds the old key", n.Name)
		}
	}
	// Longer than the failure detector needs to declare a node dead (about 0.6 s): a member
	// that could not read the others would have been dropped by now.
	load.WaitRounds(t, 20, "traffic after the rotation")
	res := load.Stop()
	moved := watch.close()
	t.Logf("rotation under traffic: %d requests served (%d on held connections), %d new connections, %d failed, %d resets",
		res.OK, res.OnHeld, res.NewRequests, res.FailedNew, len(res.Resets))
	if res.FailedNew > 0 || len(res.Failed) > 0 || len(res.Resets) > 0 {
		t.Errorf("requests failed during the rotation: %v; resets: %v", res.Failed, res.Resets)
	}
	if len(moved) > 0 {
		t.Errorf("the client's neighbour entry of %s left %s during the rotation: %v", vip, owner, moved)
	}
	if n := kl.count(`"Announcing VIP"`); n != announced {
		t.Errorf("%d VIP announcements during the rotation (the VIP moved)", n-announced)
	}
	for _, n := range members {
		after := kl.metrics(t, n)
		for _, name := range []string{"portico_agent_membership_changes_total", "portico_agent_membership_decrypt_failures_total"} {
			if b, a := metricValue(before[n.Name], name), metricValue(after, name); a != b {
				t.Errorf("%s: %s went from %s to %s during the rotation", n.Name, name, b, a)
			}
		}
		if !strings.Contains(after, `portico_agent_membership_nodes{state="alive"} 3`+"\n") {
			t.Errorf("%s's view after the rotation is not the three members", n.Name)
		}
	}
	arpingOnlyIn(t, client, vip, ownerMAC, kl.macs)

	// 4. An agent with another key: decryption failures, counted and reported.
	stranger := nodes[3]
	keyFile := filepath.Join(t.TempDir(), "wrong-key")
	if err := os.WriteFile(keyFile, []byte("not the cluster's key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Membership only (no announcer): it stays out of the VIP's way while it is alone.
	p := stranger.Run(t, kl.env.Agent, kl.agentArgs(stranger, "--membership-secret-file="+keyFile)...)
	kl.agents[stranger.Name] = p
	failures := func(n *netlab.Node) string {
		m, _ := keyMetricsOf(n) // the stranger's may not serve yet
		return metricValue(m, "portico_agent_membership_decrypt_failures_total")
	}
	wait.For(t, 30*time.Second, "decryption failures counted by the stranger and by the members", func() error {
		var zero []string
		for _, n := range nodes {
			if v := failures(n); v == "" || v == "0" {
				zero = append(zero, n.Name)
			}
		}
		if len(zero) > 0 {
			return fmt.Errorf("no decryption failure counted on %v", zero)
		}
		return nil
	}, p.Output)
	wait.For(t, 30*time.Second, "a MembershipDecryptFailed Event on the stranger's Node", func() error {
		list, err := kl.env.CS.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == "MembershipDecryptFailed" {
				seen = append(seen, eventLine(e))
				if e.Regarding.Kind == "Node" && e.Regarding.Name == stranger.Name && e.Type == corev1.EventTypeWarning {
					t.Logf("Event: %s", eventLine(e))
					return nil
				}
			}
		}
		return fmt.Errorf("MembershipDecryptFailed Events: %v", seen)
	})
	for _, n := range nodes {
		t.Logf("%s: %s decryption failures", n.Name, failures(n))
	}
	for _, n := range members {
		if m := kl.metrics(t, n); !strings.Contains(m, `portico_agent_membership_nodes{state="alive"} 3`+"\n") {
			t.Errorf("%s's view changed with a stranger around", n.Name)
		}
	}
	if m := kl.metrics(t, stranger); !strings.Contains(m, `portico_agent_membership_nodes{state="alive"} 1`+"\n") {
		t.Errorf("the stranger joined someone:\n%s", grepLines(m, "portico_agent_membership_nodes"))
	}
}

// startKeyLab starts the lab (IPv4, four nodes, one client), the control plane with the
// namespace, the controller, an L2 pool, the client's on-link route to it and one echo pod on
// each of the first three nodes.
func startKeyLab(ctx context.Context, t *testing.T) *keyLab {
	t.Helper()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-l2key-", Lab: netlab.Options{Nodes: 4, Clients: 1},
		CRDDir: filepath.Join("..", "..", "..", "deploy", "crds"), Namespaces: []string{keyNS}, Controller: true})
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	kl := &keyLab{env: env, agents: map[string]*netlab.Process{}, macs: map[string]string{}}
	for _, n := range env.Lab.Nodes() {
		if err := n.Do(func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err == nil {
				kl.macs[n.Name] = ifi.HardwareAddr.String()
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{keyPool}, Announce: v1alpha1.Announce{L2: &v1alpha1.L2Announce{}}}}
	if err := env.CL.Create(ctx, pool); err != nil {
		t.Fatalf("creating pool: %v", err)
	}
	if _, err := env.Lab.Clients()[0].Exec(ctx, "ip", "route", "add", keyOnLink, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	for _, n := range env.Lab.Nodes()[:3] {
		p := n.AddPod(t, "web-"+n.Name)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + n.Name, Namespace: keyNS, Labels: map[string]string{"app": "web"}}}
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo"}}
		if _, err := env.Cluster.CreateReadyPod(ctx, pod, n.Name, p.Addr); err != nil {
			t.Fatal(err)
		}
		p.StartEchoServer(t, "tcp", echoPort)
	}
	return kl
}

// agentArgs are an agent's flags in the key lab, plus extra.
func (kl *keyLab) agentArgs(n *netlab.Node, extra ...string) []string {
	var cidrs []string
	for _, o := range kl.env.Lab.Nodes() {
		cidrs = append(cidrs, o.PodCIDR.String())
	}
	return append([]string{
		"--kubeconfig=" + kl.env.Kubeconfig, "--hostname-override=" + n.Name,
		"--iptables-sync-period=30s", "--iptables-min-sync-period=100ms",
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=0.0.0.0:10249",
		"--cluster-cidr=" + strings.Join(cidrs, ","),
		"--membership", "--membership-rejoin-interval=1s", "-v=1",
	}, extra...)
}

// metrics returns n's agent's /metrics.
func (kl *keyLab) metrics(tb testing.TB, n *netlab.Node) string {
	tb.Helper()
	m, err := keyMetricsOf(n)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func keyMetricsOf(n *netlab.Node) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + netip.AddrPortFrom(n.Addr, 10249).String() + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitMetrics waits until n's agent's /metrics hold each line.
func (kl *keyLab) waitMetrics(tb testing.TB, n *netlab.Node, within time.Duration, lines ...string) {
	tb.Helper()
	wait.For(tb, within, fmt.Sprintf("%s's metrics to hold %q", n.Name, lines), func() error {
		m, err := keyMetricsOf(n)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if !strings.Contains(m, l+"\n") {
				return fmt.Errorf("no %q in:\n%s", l, grepLines(m, "portico_agent_membership"))
			}
		}
		return nil
	}, func() string { return tail(kl.agents[n.Name].Output(), 20) })
}

// count counts the log lines of every agent that contain s.
func (kl *keyLab) count(s string) int {
	n := 0
	for _, p := range kl.agents {
		n += strings.Count(p.Output(), s)
	}
	return n
}

func (kl *keyLab) nodeOfMAC(mac string) string {
	for n, m := range kl.macs {
		if m == mac {
			return n
		}
	}
	return ""
}

// watchNeighbour samples the client's neighbour entry of a VIP every 10 ms and keeps every MAC
// other than want that it saw (restart_test.go's neighbourWatch, for one VIP of this lab).
func (kl *keyLab) watchNeighbour(h *netlink.Handle, v netip.Addr, want string) *neighbourWatch {
	w := &neighbourWatch{stop: make(chan struct{}), done: make(chan struct{}), other: map[string]bool{}}
	go func() {
		defer close(w.done)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			if mac := netlab.Neighbour(h, v); mac != nil && mac.String() != want {
				w.other[fmt.Sprintf("%s (%s)", mac, kl.nodeOfMAC(mac.String()))] = true
			}
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

// arpingOnlyIn asks with Debian's arping from client who has v4: only the MAC want answers.
func arpingOnlyIn(tb testing.TB, client *netlab.Host, v4 netip.Addr, want string, macs map[string]string) {
	tb.Helper()
	out, err := client.Exec(context.Background(), "arping", "-c", "2", "-w", "2", "-I", "eth0", v4.String())
	if err != nil {
		tb.Fatalf("arping %s: %v\n%s", v4, err, out)
	}
	s := strings.ToLower(string(out))
	if !strings.Contains(s, want) {
		tb.Errorf("arping %s: no answer from %s:\n%s", v4, want, s)
	}
	for n, mac := range macs {
		if mac != want && strings.Contains(s, mac) {
			tb.Errorf("arping %s: %s (%s) answers too:\n%s", v4, n, mac, s)
		}
	}
}

// keyFingerprint is the fingerprint the agents show for a Secret's value, as docs/membership.md
// tells operators to compute it: the key is the SHA-256 of the value (surrounding white space
// removed), the fingerprint the first 8 hex digits of the SHA-256 of the key.
func keyFingerprint(value []byte) string {
	key := sha256.Sum256(bytes.TrimSpace(value))
	fp := sha256.Sum256(key[:])
	return hex.EncodeToString(fp[:4])
}

// keyLine is the metric line of a key in an agent's keyring.
func keyLine(fingerprint string, primary bool) string {
	return fmt.Sprintf(`portico_agent_membership_keys{fingerprint=%q,primary="%t"} 1`, fingerprint, primary)
}

// metricValue returns the value of the unlabelled metric name in m ("" when absent).
func metricValue(m, name string) string {
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func eventLine(e eventsv1.Event) string {
	return fmt.Sprintf("%s %s/%s %s: %s", e.Type, e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
}
