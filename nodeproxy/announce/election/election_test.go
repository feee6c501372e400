package election

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func node(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func label(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[k] = v }
}

func networkUnavailable(s corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: s})
	}
}

func deleting(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }

func taint(key string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// byHash is the documented order written out independently: hex SHA-256 of "name#vip".
func byHash(vip string, names ...string) []string {
	out := slices.Clone(names)
	key := func(n string) string {
		s := sha256.Sum256([]byte(n + "#" + vip))
		return hex.EncodeToString(s[:])
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

func alive(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

func TestCandidates(t *testing.T) {
	vip := netip.MustParseAddr("198.18.0.10")
	vip6 := netip.MustParseAddr("fd00:c613:ff00::a")
	all := []*corev1.Node{node("a"), node("b"), node("c"), node("d")}
	tests := []struct {
		name string
		in   Input
		want []string
	}{
		{"every node, hash order", Input{VIP: vip, Nodes: all}, byHash("198.18.0.10", "a", "b", "c", "d")},
		{"IPv6 hashes the canonical text", Input{VIP: vip6, Nodes: all}, byHash("fd00:c613:ff00::a", "a", "b", "c", "d")},
		{"dead nodes are out", Input{VIP: vip, Nodes: all, Alive: alive("a", "c")}, byHash("198.18.0.10", "a", "c")},
		{"nobody alive", Input{VIP: vip, Nodes: all, Alive: alive()}, []string{}},
		{"upstream exclusions", Input{VIP: vip, Nodes: []*corev1.Node{
			node("a", label("node.kubernetes.io/exclude-from-external-load-balancers", "")),
			node("b", label("node.kubernetes.io/exclude-from-external-load-balancers", "false")),
			node("c", taint("ToBeDeletedByClusterAutoscaler")),
			node("d", deleting),
			node("e"),
		}}, byHash("198.18.0.10", "b", "e")},
		{"network unavailable", Input{VIP: vip, Nodes: []*corev1.Node{
			node("a", networkUnavailable(corev1.ConditionTrue)),
			node("b", networkUnavailable(corev1.ConditionFalse)),
			node("c", networkUnavailable(corev1.ConditionUnknown)),
		}}, byHash("198.18.0.10", "b", "c")},
		{"node selector", Input{VIP: vip, Nodes: []*corev1.Node{
			node("a", label("l2", "yes")), node("b"), node("c", label("l2", "yes")),
		}, NodeSelector: labels.SelectorFromSet(labels.Set{"l2": "yes"})}, byHash("198.18.0.10", "a", "c")},
		{"Local: only nodes with endpoints", Input{VIP: vip, Nodes: all, LocalOnly: true,
			WithEndpoints: map[string]bool{"b": true, "d": true, "zz": true}}, byHash("198.18.0.10", "b", "d")},
		{"Local without endpoints: nobody", Input{VIP: vip, Nodes: all, LocalOnly: true}, []string{}},
		{"endpoints ignored for Cluster", Input{VIP: vip, Nodes: all, WithEndpoints: map[string]bool{"b": true}},
			byHash("198.18.0.10", "a", "b", "c", "d")},
		{"all filters together", Input{VIP: vip, Nodes: []*corev1.Node{
			node("a", label("l2", "yes")), node("b", label("l2", "yes")), node("c", label("l2", "yes")), node("d"),
		}, Alive: alive("a", "b", "d"), NodeSelector: labels.SelectorFromSet(labels.Set{"l2": "yes"}),
			LocalOnly: true, WithEndpoints: map[string]bool{"b": true, "c": true, "d": true}}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Candidates(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Candidates = %v, want %v", got, tt.want)
			}
			w, ok := Winner(tt.in)
			if ok != (len(tt.want) > 0) || (ok && w != tt.want[0]) {
				t.Fatalf("Winner = %q, %v; want first of %v", w, ok, tt.want)
			}
		})
	}
}

// The properties the doc promises: the same answer whatever the order of the nodes, losing a
// node moves only its VIPs, and a new node takes only VIPs it sorts first for.
func TestStability(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	var nodes []*corev1.Node
	for _, n := range names {
		nodes = append(nodes, node(n))
	}
	var vips []netip.Addr
	for i := 1; i <= 200; i++ {
		vips = append(vips, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
	}
	winners := func(nodes []*corev1.Node, aliveNames []string) map[netip.Addr]string {
		m := map[netip.Addr]string{}
		for _, v := range vips {
			w, _ := Winner(Input{VIP: v, Nodes: nodes, Alive: alive(aliveNames...)})
			m[v] = w
		}
		return m
	}
	base := winners(nodes, names)
	spread := map[string]int{}
	for _, w := range base {
		spread[w]++
	}
	if len(spread) != len(names) {
		t.Fatalf("200 VIPs spread over %d of %d nodes: %v", len(spread), len(names), spread)
	}

	reversed := slices.Clone(nodes)
	slices.Reverse(reversed)
	if got := winners(reversed, names); !mapsEqual(got, base) {
		t.Fatal("the order of the Node list changed the winners")
	}

	without := winners(nodes, []string{"n1", "n2", "n4", "n5"})
	for v, w := range base {
		if w != "n3" && without[v] != w {
			t.Errorf("%s moved from %s to %s when n3 died", v, w, without[v])
		}
		if w == "n3" && without[v] == "n3" {
			t.Errorf("%s still on dead n3", v)
		}
	}

	more := winners(append(slices.Clone(nodes), node("n6")), append(slices.Clone(names), "n6"))
	for v, w := range base {
		if more[v] != w && more[v] != "n6" {
			t.Errorf("%s moved from %s to %s when n6 joined", v, w, more[v])
		}
	}
}

func mapsEqual(a, b map[netip.Addr]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
