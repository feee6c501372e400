package bgp

import (
	"context"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

var (
	vip4 = netip.MustParseAddr("198.18.230.5")
	vip6 = netip.MustParseAddr("fd00:c613:ff02::205")
)

func nodeAddrs(skip string) (v4, v6 []netip.Addr) {
	for _, n := range shared.Lab.Nodes() {
		if n.Name != skip {
			v4, v6 = append(v4, n.Addr), append(v6, n.Addr6)
		}
	}
	return v4, v6
}

func waitAll(tb testing.TB, skip string, within time.Duration) string {
	tb.Helper()
	v4, v6 := nodeAddrs(skip)
	out := waitHops(tb, vip4, v4, within)
	waitHops(tb, vip6, v6, within)
	return out
}

func served(tb testing.TB) {
	tb.Helper()
	for _, v := range []netip.Addr{vip4, vip6} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := shared.outside.Request(ctx, "tcp", netip.AddrPortFrom(v, echoPort))
		cancel()
		if err != nil {
			tb.Fatalf("request to %s from behind the router: %v", v, err)
		}
		tb.Logf("%s served by %+v", v, r)
	}
}

// peerStatus waits until every node's entry of the BGPPeer satisfies ok.
func peerStatus(tb testing.TB, name string, ok func(v1alpha1.BGPPeerNodeStatus) bool, within time.Duration) v1alpha1.BGPPeer {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		var p v1alpha1.BGPPeer
		if err := shared.CL.Get(context.Background(), types.NamespacedName{Name: name}, &p); err != nil {
			tb.Fatal(err)
		}
		good := len(p.Status.Nodes) == len(shared.Lab.Nodes())
		for _, e := range p.Status.Nodes {
			good = good && ok(e)
		}
		if good {
			return p
		}
		if time.Now().After(deadline) {
			dumpBGP(tb)
			tb.Fatalf("BGPPeer %s status: %+v", name, p.Status.Nodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBGPAnnounce(t *testing.T) {
	setup(t)
	backends(t)
	createService(t, "web", []netip.Addr{vip4, vip6}, nil)

	// Every node advertises both VIPs (externalTrafficPolicy: Cluster) with the pool's
	// attributes, over IPv4 and IPv6 sessions with BFD and MD5.
	out := waitAll(t, "", 30*time.Second)
	for _, attr := range []string{"BGP.community: (64700,100)", "BGP.large_community: (64700, 1, 2)"} {
		if !strings.Contains(out, attr) {
			t.Errorf("router's route lacks %q:\n%s", attr, out)
		}
	}
	served(t)
	for _, addr := range []netip.Addr{routerHost().Addr, routerHost().Addr6} {
		p := peerStatus(t, peerName(addr), func(e v1alpha1.BGPPeerNodeStatus) bool {
			return e.Session == "Established" && e.BFD == "Up" && e.AdvertisedPrefixes == 1
		}, 30*time.Second)
		t.Logf("BGPPeer %s: %+v", p.Name, p.Status.Nodes)
	}

	n := shared.Lab.Nodes()[1]
	t.Run("node excluded by label withdraws", func(t *testing.T) {
		label(t, n.Name, "true")
		waitAll(t, n.Name, 10*time.Second)
		label(t, n.Name, "")
		waitAll(t, "", 10*time.Second)
	})

	t.Run("graceful shutdown withdraws before exit", func(t *testing.T) {
		p := agentOf(n.Name)
		if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		exited := time.Now()
		// BFD or the hold timer would need at least 300 ms; the withdrawal is already there.
		waitAll(t, n.Name, 150*time.Millisecond)
		t.Logf("withdrawn %s after the agent exited", time.Since(exited))
		if err := startAgent(n); err != nil {
			t.Fatal(err)
		}
		waitAll(t, "", 30*time.Second)
	})

	t.Run("missing Secret: status and Event, the session stays", func(t *testing.T) {
		setSecret(t, "router-v4", "no-such-secret")
		peerStatus(t, "router-v4", func(e v1alpha1.BGPPeerNodeStatus) bool {
			return e.Session == "Established" && strings.Contains(e.Message, "no-such-secret")
		}, 15*time.Second)
		waitAll(t, "", time.Second)
		waitEvent(t, "router-v4", "InvalidBGPPeer", "no-such-secret")
		setSecret(t, "router-v4", "bgp-password")
		peerStatus(t, "router-v4", func(e v1alpha1.BGPPeerNodeStatus) bool { return e.Session == "Established" && e.Message == "" }, 15*time.Second)
	})

	t.Run("wrong password: no session, clear status", func(t *testing.T) {
		sec := "bgp-wrong"
		if _, err := shared.CS.CoreV1().Secrets("kube-system").Create(context.Background(), secretWith(sec, "not-the-password"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Gone at the end, so that the test runs again in one process (-count).
		t.Cleanup(func() {
			if err := shared.CS.CoreV1().Secrets("kube-system").Delete(context.Background(), sec, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting Secret %s: %v", sec, err)
			}
		})
		setSecret(t, "router-v4", sec)
		waitHops(t, vip4, nil, 30*time.Second)
		p := peerStatus(t, "router-v4", func(e v1alpha1.BGPPeerNodeStatus) bool {
			return e.Session != "Established" && strings.Contains(e.Message, "password")
		}, 30*time.Second)
		t.Logf("status: %+v", p.Status.Nodes[0])
		setSecret(t, "router-v4", "bgp-password")
		waitAll(t, "", 30*time.Second)
	})

	t.Run("externalTrafficPolicy Local: endpoint loss withdraws", func(t *testing.T) {
		patch := []byte(`{"spec":{"externalTrafficPolicy":"Local"}}`)
		if _, err := shared.CS.CoreV1().Services(namespace).Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAll(t, "", 10*time.Second)
		last := shared.Lab.Nodes()[2].Name
		if err := shared.CS.CoreV1().Pods(namespace).Delete(context.Background(), "web-"+last, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		waitAll(t, last, 30*time.Second)
		served(t)
		createPod(t, last, shared.pods[last])
		waitAll(t, "", 30*time.Second)
	})
}

func waitEvent(tb testing.TB, peer, reason, note string) {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := shared.CS.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "BGPPeer" && e.Regarding.Name == peer && e.Reason == reason && strings.Contains(e.Note, note) {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no %s Event on BGPPeer %s mentioning %q (%d events in default)", reason, peer, note, len(list.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func agentOf(name string) *netlab.Process {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.agents[name]
}

func label(tb testing.TB, node, value string) {
	tb.Helper()
	patch := `{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":null}}}`
	if value != "" {
		patch = `{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":"` + value + `"}}}`
	}
	if _, err := shared.CS.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		tb.Fatal(err)
	}
}

func setSecret(tb testing.TB, peer, secret string) {
	tb.Helper()
	var p v1alpha1.BGPPeer
	if err := shared.CL.Get(context.Background(), types.NamespacedName{Name: peer}, &p); err != nil {
		tb.Fatal(err)
	}
	orig := p.DeepCopy()
	p.Spec.PasswordSecretRef.Name = secret
	if err := shared.CL.Patch(context.Background(), &p, client.MergeFrom(orig)); err != nil {
		tb.Fatal(err)
	}
}
