package l2

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/latency"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

const (
	// startAPIDelay is what the slow API server adds to every answer (each TLS handshake
	// and request takes a few of them).
	startAPIDelay = time.Second
	// startLiveMax bounds the time from the agent's start to its first /livez 200.
	startLiveMax = time.Second
	// startReadyMax bounds the time to /readyz 200: below the 30 s that three joins of silent
	// peers take one after another (memberlist's 10 s TCP timeout each), which a start that
	// waited for them would need before its first sync.
	startReadyMax = 25 * time.Second
	startNS       = "portico-system"
	// Addresses of Nodes nobody answers for: they resolve to a MAC nobody has.
	startSilentNet = "198.18.250.0/24"
	startSilentMAC = "02:00:c6:12:fa:00"
)

// TestStartLiveAtOnce: an agent started where three Nodes that run (scheduled) agent pods do
// not answer at all (their InternalIPs lead to a MAC nobody has: every SYN is lost, as to a
// powered-off node), where a fourth Node runs no agent (e.g. a Windows node), and where every
// answer of the API server comes startAPIDelay late, answers /livez at once, answers /readyz
// and /healthz with 503 until its first full sync, and is ready after that sync, well before
// the joins of the silent peers could have ended: the joins run in the background. It joins
// only the Nodes with a pod of its DaemonSet (3 peers, not 4).
func TestStartLiveAtOnce(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-l2start-", Lab: netlab.Options{Nodes: 1},
		CRDDir: filepath.Join("..", "..", "..", "deploy", "crds"), Namespaces: []string{startNS}})
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	node := env.Lab.Nodes()[0]
	if _, err := node.Exec(ctx, "ip", "route", "add", startSilentNet, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	ds := startDaemonSet(ctx, t, env)
	if _, err := env.Cluster.CreateReadyPod(ctx, startAgentPod(ds, node.Name), node.Name, node.Addr); err != nil {
		t.Fatal(err)
	}
	silent := netip.MustParsePrefix(startSilentNet).Addr()
	for i := 1; i <= 4; i++ {
		ip := silent.Next()
		silent = ip
		name := fmt.Sprintf("silent%d", i)
		if i == 4 {
			name = "windows1" // no agent pod: never a peer
		}
		if _, err := node.Exec(ctx, "ip", "neigh", "replace", ip.String(), "lladdr", startSilentMAC, "dev", "eth0", "nud", "permanent"); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Cluster.RegisterNode(ctx, cluster.NodeSpec{Name: name, InternalIPs: []netip.Addr{ip}}); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if _, err := env.Cluster.CreateReadyPod(ctx, startAgentPod(ds, name), name, ip); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The slow API server: a proxy on the root link in front of the real one.
	proxy := latency.StartForTest(t, netip.AddrPortFrom(env.Lab.RootAddr(), 0).String(), strings.TrimPrefix(env.Cluster.Host(), "https://"), startAPIDelay)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Cluster.WriteKubeconfig(kubeconfig, "https://"+proxy.Addr()); err != nil {
		t.Fatal(err)
	}

	probe := func(path string) (int, error) {
		c := &http.Client{Timeout: 500 * time.Millisecond}
		resp, err := c.Get("http://" + netip.AddrPortFrom(node.Addr, 10256).String() + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	begin := time.Now()
	agent := node.Run(t, env.Agent, "--kubeconfig="+kubeconfig, "--hostname-override="+node.Name,
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=0", "--announce=l2", "--membership",
		"--daemonset="+startNS+"/"+ds.Name, "-v=1")
	alive := func() error {
		select {
		case <-agent.Done():
			return wait.Stop(fmt.Errorf("the agent exited:\n%s", agent.Output()))
		default:
			return nil
		}
	}
	var live time.Duration
	if err := wait.Poll(ctx, 20*time.Millisecond, startLiveMax+5*time.Second, "/livez 200", func(context.Context) error {
		if err := alive(); err != nil {
			return err
		}
		code, err := probe("/livez")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/livez %d", code)
		}
		live = time.Since(begin)
		return nil
	}); err != nil {
		t.Fatalf("%v (%v after the start)\n%s", err, time.Since(begin), agent.Output())
	}
	t.Logf("/livez 200 %v after the start", live.Round(time.Millisecond))
	if live > startLiveMax {
		t.Errorf("/livez answered 200 only %v after the start, want within %v", live, startLiveMax)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, err := probe(path); err != nil || code != http.StatusServiceUnavailable {
			t.Errorf("%s before the first sync: %d %v, want 503", path, code, err)
		}
	}

	var ready time.Duration
	wait.For(t, startReadyMax, "/readyz and /healthz 200 after the first sync", func() error {
		if err := alive(); err != nil {
			return err
		}
		for _, path := range []string{"/readyz", "/healthz"} {
			if code, err := probe(path); err != nil || code != http.StatusOK {
				return fmt.Errorf("%s %d %v", path, code, err)
			}
		}
		ready = time.Since(begin)
		return nil
	}, agent.Output)
	t.Logf("ready %v after the start (API answers %v late, 3 silent peers)", ready.Round(time.Millisecond), startAPIDelay)
	if !strings.Contains(agent.Output(), `"Synced"`) {
		t.Errorf("ready without a logged sync:\n%s", agent.Output())
	}
	if out := agent.Output(); !strings.Contains(out, "peers=3") {
		t.Errorf("the agent did not start membership with the 3 Nodes that run its pods as peers (windows1 runs none):\n%s", out)
	}
	if code, err := probe("/livez"); err != nil || code != http.StatusOK {
		t.Errorf("/livez after the first sync: %d %v, want 200", code, err)
	}
}

// startDaemonSet creates the agent's DaemonSet (no controller runs it: the test creates its
// pods).
func startDaemonSet(ctx context.Context, t *testing.T, env *labcluster.Env) *appsv1.DaemonSet {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "portico-agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "portico-agent", Namespace: startNS}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			HostNetwork: true, Containers: []corev1.Container{{Name: "agent", Image: "portico.invalid/portico-agent"}}}},
	}}
	ds, err := env.CS.AppsV1().DaemonSets(startNS).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// startAgentPod is the pod of ds on node, as the DaemonSet controller would make it.
func startAgentPod(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + node, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{HostNetwork: true, Containers: ds.Spec.Template.Spec.Containers}}
}
