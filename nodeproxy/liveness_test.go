package nodeproxy

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSettling: a starting agent counts the nodes of agents that have not joined yet as alive,
// until each has joined (or left) or the settle time has passed; then the view is membership's
// alone. Dead is never presumed away.
func TestSettling(t *testing.T) {
	start := time.Unix(1000, 0)
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	steps := []struct {
		name        string
		at          time.Duration
		alive, dead map[string]bool
		want        []string
		settled     bool
	}{
		{"alone at start: the others presumed", 0, set("n1"), set(), []string{"n1", "n2", "n3"}, false},
		{"n2 joined: n3 still presumed", time.Second, set("n1", "n2"), set(), []string{"n1", "n2", "n3"}, false},
		{"n2 left again: dead, not presumed", 2 * time.Second, set("n1"), set("n2"), []string{"n1", "n3"}, false},
		{"settle time over: n3 never joined", startupSettle, set("n1"), set("n2"), []string{"n1"}, true},
		{"settled for good", startupSettle + time.Second, set("n1"), set(), []string{"n1"}, true},
	}
	s := &settling{until: start.Add(startupSettle), log: logr.Discard(), peers: func() []string { return []string{"n2", "n3"} }}
	for _, st := range steps {
		got := s.view(start.Add(st.at), maps.Clone(st.alive), st.dead)
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, st.want) {
			t.Errorf("%s: view %v, want %v", st.name, names, st.want)
		}
		if s.done.Load() != st.settled {
			t.Errorf("%s: settled %v, want %v", st.name, s.done.Load(), st.settled)
		}
	}

	// Every other agent joined before the settle time: settled at once.
	s = &settling{until: start.Add(startupSettle), log: logr.Discard(), peers: func() []string { return []string{"n2", "n3"} }}
	if !s.settled(start, set("n1", "n2", "n3"), set()) {
		t.Error("all joined: not settled")
	}
	if got := s.view(start, set("n1"), set()); len(got) != 1 {
		t.Errorf("after settling, a node that left is presumed alive again: %v", got)
	}
}

// TestPeers: the peers are the other Nodes where a pod of the agent's DaemonSet is scheduled
// and not finished (not a Windows node, a virtual node or one outside the selector), by their
// InternalIPs of the bind family; without the pods (no --daemonset) every other Node.
func TestPeers(t *testing.T) {
	node := func(name string, ips ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		return n
	}
	yes := true
	pod := func(name, node, ownerKind, owner string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: ownerKind, Name: owner, Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	nodes := []*corev1.Node{
		node("self", "198.18.1.1", "fd00:c613::1"), node("linux", "198.18.1.2", "fd00:c613::2"), node("pending", "198.18.1.3"),
		node("windows", "198.18.1.4"), node("virtual", "198.18.1.5"), node("v6only", "fd00:c613::6"), node("finished", "198.18.1.7"),
	}
	pods := []*corev1.Pod{
		pod("a1", "self", "DaemonSet", "portico-agent", corev1.PodRunning),
		pod("a2", "linux", "DaemonSet", "portico-agent", corev1.PodRunning),
		pod("a3", "pending", "DaemonSet", "portico-agent", corev1.PodPending),
		pod("a4", "v6only", "DaemonSet", "portico-agent", corev1.PodRunning),
		pod("a5", "finished", "DaemonSet", "portico-agent", corev1.PodFailed),
		pod("other", "windows", "DaemonSet", "something-else", corev1.PodRunning),
		pod("rs", "virtual", "ReplicaSet", "portico-agent", corev1.PodRunning),
		pod("unscheduled", "", "DaemonSet", "portico-agent", corev1.PodPending),
	}
	withAgent := agentNodes(pods, "portico-agent")
	if got := slices.Sorted(maps.Keys(withAgent)); !slices.Equal(got, []string{"linux", "pending", "self", "v6only"}) {
		t.Errorf("nodes with an agent: %v", got)
	}
	v4, v6 := netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("fd00:c613::1")
	for _, tc := range []struct {
		name      string
		withAgent map[string]bool
		bind      netip.Addr
		want      map[string][]netip.Addr
	}{
		{"agents, IPv4", withAgent, v4, map[string][]netip.Addr{"linux": {netip.MustParseAddr("198.18.1.2")}, "pending": {netip.MustParseAddr("198.18.1.3")}}},
		{"agents, IPv6", withAgent, v6, map[string][]netip.Addr{"linux": {netip.MustParseAddr("fd00:c613::2")}, "v6only": {netip.MustParseAddr("fd00:c613::6")}}},
		{"no DaemonSet: every other Node", nil, v4, map[string][]netip.Addr{
			"linux": {netip.MustParseAddr("198.18.1.2")}, "pending": {netip.MustParseAddr("198.18.1.3")}, "windows": {netip.MustParseAddr("198.18.1.4")},
			"virtual": {netip.MustParseAddr("198.18.1.5")}, "finished": {netip.MustParseAddr("198.18.1.7")}}},
	} {
		if got := peerNodes(nodes, tc.withAgent, "self", tc.bind); !maps.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: peers %v, want %v", tc.name, got, tc.want)
		}
	}
}
