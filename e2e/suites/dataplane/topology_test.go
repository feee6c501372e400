package dataplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// setZones labels node1 and node2 with zones a and b until the test ends.
func (e *env) setZones() {
	e.t.Helper()
	nodes := e.cs.CoreV1().Nodes()
	for node, zone := range map[*netlab.Node]string{e.node1: "zone-a", e.node2: "zone-b"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, zone)
		if _, err := nodes.Patch(e.ctx, node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() {
			unset := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, corev1.LabelTopologyZone)
			_, _ = nodes.Patch(context.Background(), node.Name, types.MergePatchType, []byte(unset), metav1.PatchOptions{})
		})
	}
}

// waitHints waits until the EndpointSlice controller has given every ready endpoint of svc a
// hint (zones, or nodes too when nodes is set).
func (e *env) waitHints(svc string, ready int, nodes bool) {
	e.t.Helper()
	e.eventually("topology hints on "+svc, 30*time.Second, func() error {
		hinted, err := e.countEndpoints(svc, func(ep discoveryv1.Endpoint) bool {
			return ep.Hints != nil && len(ep.Hints.ForZones) > 0 && (!nodes || len(ep.Hints.ForNodes) > 0)
		})
		if err == nil && hinted != ready {
			err = fmt.Errorf("%d of %d ready endpoints hinted", hinted, ready)
		}
		return err
	})
}

// servers sends n requests from `from` to svc's ClusterIP and counts the answering pods.
func (e *env) servers(from *netlab.Host, svc *corev1.Service, n int) map[string]int {
	e.t.Helper()
	dst := addrPort(clusterIP(svc), 80)
	e.reach(from, "tcp", dst)
	got := map[string]int{}
	for range n {
		r, err := e.request(from, "tcp", dst)
		if err != nil {
			e.t.Fatalf("%s -> %s: %v", from.Name, dst, err)
		}
		got[r.Server]++
	}
	return got
}

// TestTrafficDistribution: with trafficDistribution set, the kube-controller-manager's
// EndpointSlice controller writes topology hints and the agent sends a node's ClusterIP traffic
// to the endpoints hinted for its zone (PreferSameZone) or itself (PreferSameNode), falling
// back to every endpoint when none is hinted for it; without trafficDistribution, traffic
// spreads over all endpoints.
func TestTrafficDistribution(t *testing.T) { forModes(t, testTrafficDistribution) }

func testTrafficDistribution(t *testing.T) {
	e := newEnv(t)
	e.setZones()
	a1 := e.backend(e.node1, "a1", "topo").Name
	a2 := e.backend(e.node1, "a2", "topo").Name
	b1 := e.backend(e.node2, "b1", "topo").Name
	spread := e.service("spread", "topo")
	zone := e.service("zone", "topo", func(s *corev1.Service) {
		s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameZone)
	})
	node := e.service("node", "topo", func(s *corev1.Service) {
		s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameNode)
	})
	e.waitHints("zone", 3, false)
	e.waitHints("node", 3, true)
	from1, from2 := &e.pod(e.node1, "client").Host, &e.pod(e.node2, "client").Host

	// The agents follow hints written before or after their sync: wait for the steady state.
	only := func(got map[string]int, want ...string) error {
		for name := range got {
			found := false
			for _, w := range want {
				found = found || name == w
			}
			if !found {
				return fmt.Errorf("answered by %v, want only %v", got, want)
			}
		}
		return nil
	}
	check := func(what string, from *netlab.Host, svc *corev1.Service, want ...string) {
		t.Helper()
		e.eventually(what, 20*time.Second, func() error { return only(e.servers(from, svc, 20), want...) })
	}
	check("PreferSameZone from zone-a", from1, zone, a1, a2)
	check("PreferSameZone from zone-b", from2, zone, b1)
	check("PreferSameNode from node2", from2, node, b1)
	check("PreferSameNode from node1", from1, node, a1, a2)
	// The EndpointSlice controller writes spread's slice on its own schedule (the hints waited
	// for above are zone's and node's): wait for its three endpoints, then for the agent.
	e.eventually("spread's three ready endpoints", 30*time.Second, func() error {
		n, err := e.countEndpoints("spread", func(discoveryv1.Endpoint) bool { return true })
		if err == nil && n != 3 {
			err = fmt.Errorf("%d of 3 endpoints", n)
		}
		return err
	})
	e.eventually("no trafficDistribution: every endpoint answers", 20*time.Second, func() error {
		if got := e.servers(from1, spread, 30); len(got) != 3 {
			return fmt.Errorf("answered by %v, want all three endpoints", got)
		}
		return nil
	})

	// b1 is no longer ready: zone-b has no endpoint hinted for it, so node2 uses every endpoint.
	pod, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "b1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shared.cluster.SetPodReady(e.ctx, pod, false); err != nil {
		t.Fatal(err)
	}
	e.waitHints("zone", 2, false)
	check("PreferSameZone from zone-b, no endpoint in zone-b", from2, zone, a1, a2)
	e.eventually("both zone-a endpoints serve zone-b", 20*time.Second, func() error {
		if got := e.servers(from2, zone, 20); len(got) != 2 {
			return fmt.Errorf("answered by %v, want a1 and a2", got)
		}
		return nil
	})
}
