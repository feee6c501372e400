package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// ownAgent runs an agent with args on node (one without a shared agent) until the test ends,
// and waits for its first sync.
func (e *env) ownAgent(node *netlab.Node, args ...string) *netlab.Process {
	e.t.Helper()
	p, err := node.Start(shared.agent, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("agent on %s, output tail:\n%s", node.Name, tail(p.Output()))
		}
		_ = p.Stop()
	})
	if err := p.WaitFor(e.ctx, `"Synced"`); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// replaceAgent runs node's shared agent with extra flags until the test ends, then restores
// the plain one (whatever the test's outcome).
func (e *env) replaceAgent(node *netlab.Node, extra ...string) {
	e.t.Helper()
	stopAgent(e.t, node)
	e.t.Cleanup(func() {
		stopAgent(e.t, node)
		restartAgent(e.t, node)
	})
	if err := startAgent(node, extra...); err != nil {
		e.t.Fatal(err)
	}
}

// wantRefused waits until dst stops answering from `from` and checks it stays so.
func (e *env) wantRefused(from *netlab.Host, dst netip.AddrPort, what string) {
	e.t.Helper()
	e.eventually(what+" stops answering", 15*time.Second, func() error {
		if r, err := e.request(from, "tcp", dst); err == nil {
			return fmt.Errorf("%s still answers (served by %s)", dst, r.Server)
		}
		return nil
	})
	for range 3 {
		if r, err := e.request(from, "tcp", dst); err == nil {
			e.t.Fatalf("%s: %s answered again (served by %s)", what, dst, r.Server)
		}
	}
}

// TestNodePortAddresses: --nodeport-addresses limits the node addresses NodePorts answer on,
// by CIDR and by the "primary" keyword (the Node's first InternalIP), as kube-proxy's flag; a
// list that matches no local address means no NodePorts, not all of them.
func TestNodePortAddresses(t *testing.T) { forModes(t, testNodePortAddresses) }

func testNodePortAddresses(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "npa")
	svc := e.service("npa", "npa", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	np := svc.Spec.Ports[0].NodePort
	// The healthCheckNodePort of a Local Service listens where NodePorts answer.
	hc := e.service("npa-local", "npa", loadBalancer, local).Spec.HealthCheckNodePort

	// node2 gets a second LAN address; the clients reach it on the LAN like the first.
	second := e.lab.LANPrefix().Addr().As4()
	second[3] = 77
	extra := netip.AddrFrom4(second)
	lanAddr := netip.PrefixFrom(extra, e.lab.LANPrefix().Bits()).String()
	if _, err := e.node2.Exec(e.ctx, "ip", "addr", "add", lanAddr, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.node2.Exec(context.Background(), "ip", "addr", "del", lanAddr, "dev", "eth0") })
	primary, other := addrPort(e.node2.Addr, np), addrPort(extra, np)
	primaryHC, otherHC := addrPort(e.node2.Addr, hc), addrPort(extra, hc)

	// Control: by default the NodePort and the health check answer on every node address.
	e.reach(e.client, "tcp", primary)
	e.reach(e.client, "tcp", other)
	e.wantListening(primaryHC, true)
	e.wantListening(otherHC, true)

	t.Run("cidr", func(t *testing.T) {
		e := e.in(t)
		e.replaceAgent(e.node2, "--nodeport-addresses="+e.node2.Addr.String()+"/32")
		e.reach(e.client, "tcp", primary)
		e.wantRefused(e.client, other, "the address outside --nodeport-addresses")
		e.wantListening(primaryHC, true)
		e.wantListening(otherHC, false)
	})
	t.Run("primary", func(t *testing.T) {
		e := e.in(t)
		e.replaceAgent(e.node2, "--nodeport-addresses=primary")
		e.reach(e.client, "tcp", primary)
		e.wantRefused(e.client, other, "the address that is not the Node's primary IP")
		e.wantListening(primaryHC, true)
		e.wantListening(otherHC, false)
	})
	t.Run("no matching address", func(t *testing.T) {
		e := e.in(t)
		e.replaceAgent(e.node2, "--nodeport-addresses=198.19.255.0/24")
		e.wantRefused(e.client, primary, "the primary address under a list that matches nothing")
		e.wantRefused(e.client, other, "the second address under a list that matches nothing")
		e.wantListening(primaryHC, false)
		e.wantListening(otherHC, false)
	})
	// The plain agent is back (each subtest's cleanup): every address answers again.
	e.reach(e.client, "tcp", primary)
	e.reach(e.client, "tcp", other)
	e.wantListening(otherHC, true)
}

// wantListening waits until something accepts TCP connections at dst from the first client
// (listening) or refuses them (not listening).
func (e *env) wantListening(dst netip.AddrPort, listening bool) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s listening=%v", dst, listening), 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		defer cancel()
		c, err := e.client.DialTCP(ctx, dst)
		if err == nil {
			c.Close()
		}
		if (err == nil) != listening {
			return fmt.Errorf("dial: %v", err)
		}
		return nil
	})
}

type agentHealth struct {
	Healthy      bool  `json:"healthy"`
	NodeEligible *bool `json:"nodeEligible"`
	Families     map[string]struct {
		Healthy bool `json:"healthy"`
	} `json:"families"`
}

// agentHealthz fetches the agent's /healthz or /livez on node.
func (e *env) agentHealthz(node *netlab.Node, path string) (int, agentHealth, error) {
	var h agentHealth
	code, err := e.getJSON(e.client, netip.AddrPortFrom(node.Addr, 10256), path, &h)
	return code, h, err
}

// wantHealthz waits until node's /healthz answers code with nodeEligible == eligible, and
// checks /livez stays 200 (liveness does not depend on the Node).
func (e *env) wantHealthz(node *netlab.Node, code int, eligible bool) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("/healthz %d nodeEligible=%v", code, eligible), 30*time.Second, func() error {
		got, h, err := e.agentHealthz(node, "/healthz")
		if err != nil {
			return err
		}
		if h.NodeEligible == nil {
			return fmt.Errorf("/healthz answered %d without nodeEligible", got)
		}
		if got != code || *h.NodeEligible != eligible || !h.Healthy {
			return fmt.Errorf("/healthz answered %d healthy=%v nodeEligible=%v", got, h.Healthy, *h.NodeEligible)
		}
		return nil
	})
	if got, h, err := e.agentHealthz(node, "/livez"); err != nil || got != http.StatusOK || !h.Healthy {
		e.t.Errorf("/livez: %d %+v %v, want 200", got, h, err)
	}
}

// TestHealthzFailsWhileNodeIsRemoved: the agent's /healthz (what load balancers probe under
// externalTrafficPolicy: Cluster) answers 503 with nodeEligible false while its Node carries
// the autoscaler's ToBeDeleted taint or is being deleted (KEP-3836), and /livez stays 200.
// It uses node4 (no shared agent, no test Pods) with an agent of its own.
func TestHealthzFailsWhileNodeIsRemoved(t *testing.T) {
	e := newEnv(t)
	node := shared.lab.Nodes()[3]
	e.ownAgent(node, agentArgs(node.Name)...)
	nodes := e.cs.CoreV1().Nodes()
	e.wantHealthz(node, http.StatusOK, true)

	// The autoscaler's taint.
	taint := `{"spec":{"taints":[{"key":"ToBeDeletedByClusterAutoscaler","value":"1","effect":"NoSchedule"}]}}`
	if _, err := nodes.Patch(e.ctx, node.Name, types.MergePatchType, []byte(taint), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = nodes.Patch(context.Background(), node.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
	})
	e.wantHealthz(node, http.StatusServiceUnavailable, false)
	if _, err := nodes.Patch(e.ctx, node.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantHealthz(node, http.StatusOK, true)

	// Deletion: a finalizer holds the Node in its deleting state.
	const hold = "portico-lb.io/test-hold"
	fin := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, hold)
	if _, err := nodes.Patch(e.ctx, node.Name, types.MergePatchType, []byte(fin), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreNode(t, node) })
	if err := nodes.Delete(e.ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantHealthz(node, http.StatusServiceUnavailable, false)
}

// restoreNode lets a held Node go and registers it again as the harness did.
func restoreNode(t *testing.T, node *netlab.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := shared.cs.CoreV1().Nodes()
	if _, err := nodes.Patch(ctx, node.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("releasing node %s: %v", node.Name, err)
		return
	}
	for {
		_, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Errorf("node %s still present after its finalizer was removed: %v", node.Name, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	spec := cluster.NodeSpec{Name: node.Name, InternalIPs: []netip.Addr{node.Addr, node.Addr6}, PodCIDRs: []netip.Prefix{node.PodCIDR, node.PodCIDR6}}
	if _, err := shared.cluster.RegisterNode(ctx, spec); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("registering node %s again: %v", node.Name, err)
	}
}

// TestHealthzFailsWhenRulesAreStale: when iptables-restore starts failing, the agent's /healthz
// and /livez answer 503 once a change has waited 2 x --iptables-sync-period (10 s here) for a successful
// sync, with the failing family marked unhealthy; both recover when restores work again. The
// agent on node4 uses an iptables-restore wrapper that fails while a flag file exists.
func TestHealthzFailsWhenRulesAreStale(t *testing.T) {
	e := newEnv(t)
	node := shared.lab.Nodes()[3]
	real, err := exec.LookPath("iptables")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	for name, script := range map[string]string{
		"iptables":         fmt.Sprintf("exec %s \"$@\"\n", real),
		"iptables-save":    fmt.Sprintf("exec %s-save \"$@\"\n", real),
		"iptables-restore": fmt.Sprintf("if [ -e %s ]; then echo 'iptables-restore: failing on purpose' >&2; exit 1; fi\nexec %s-restore \"$@\"\n", flag, real),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.ownAgent(node, agentArgs(node.Name, "--iptables="+filepath.Join(dir, "iptables"))...)
	e.wantAgentHealth(node, http.StatusOK, true, true)

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failingSince := time.Now()
	e.service("stale", "stale") // a change the agent cannot apply
	e.wantAgentHealth(node, http.StatusServiceUnavailable, false, false)
	if waited := time.Since(failingSince); waited < 10*time.Second {
		t.Errorf("unhealthy after %s, before the 10 s timeout", waited.Round(time.Millisecond))
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	e.wantAgentHealth(node, http.StatusOK, true, true)
}

// wantAgentHealth waits until node's /healthz and /livez both answer code, with healthy and the
// IPv4 family's healthy as given.
func (e *env) wantAgentHealth(node *netlab.Node, code int, healthy, ipv4 bool) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("/healthz and /livez %d healthy=%v", code, healthy), 60*time.Second, func() error {
		for _, path := range []string{"/healthz", "/livez"} {
			got, h, err := e.agentHealthz(node, path)
			if err != nil {
				return err
			}
			if got != code || h.Healthy != healthy || h.Families["IPv4"].Healthy != ipv4 {
				return fmt.Errorf("%s answered %d healthy=%v families=%+v", path, got, h.Healthy, h.Families)
			}
		}
		return nil
	})
}
