package election

import (
	"bytes"
	"crypto/sha256"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/portico-lb/portico/servicerules"
)

// Input is everything the choice for one VIP depends on. Every agent must pass the same values
// to reach the same answer.
type Input struct {
	// VIP is the address being announced.
	VIP netip.Addr
	// Nodes are the cluster's Node objects.
	Nodes []*corev1.Node
	// Alive reports whether membership sees the node alive. Nil means no membership: every
	// node counts as alive.
	Alive func(node string) bool
	// NodeSelector is the pool's L2 node selector; nil selects every node.
	NodeSelector labels.Selector
	// LocalOnly is set for externalTrafficPolicy: Local; then only nodes in WithEndpoints
	// (nodes hosting a ready endpoint of the Service) are candidates.
	LocalOnly     bool
	WithEndpoints map[string]bool
}

// Eligible reports whether a node may announce any VIP, before membership, selectors and
// endpoints are considered: it is an eligible load-balancer node (servicerules.NodeEligible) and its
// network is not reported unavailable.
func Eligible(n *corev1.Node) bool {
	if !servicerules.NodeEligible(n) {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// Candidates returns the names of the nodes that may announce in.VIP, best first.
func Candidates(in Input) []string {
	type cand struct {
		name string
		hash [sha256.Size]byte
	}
	var cs []cand
	for _, n := range in.Nodes {
		if !Eligible(n) {
			continue
		}
		if in.Alive != nil && !in.Alive(n.Name) {
			continue
		}
		if in.NodeSelector != nil && !in.NodeSelector.Matches(labels.Set(n.Labels)) {
			continue
		}
		if in.LocalOnly && !in.WithEndpoints[n.Name] {
			continue
		}
		cs = append(cs, cand{name: n.Name, hash: score(n.Name, in.VIP)})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if c := bytes.Compare(a.hash[:], b.hash[:]); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.name), []byte(b.name))
	})
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return names
}

// Winner returns the node that announces in.VIP, and false when no node may.
func Winner(in Input) (string, bool) {
	cs := Candidates(in)
	if len(cs) == 0 {
		return "", false
	}
	return cs[0], true
}

// score is the node's rank for vip: SHA-256 of "node#vip".
func score(node string, vip netip.Addr) [sha256.Size]byte {
	return sha256.Sum256([]byte(node + "#" + vip.Unmap().WithZone("").String()))
}
