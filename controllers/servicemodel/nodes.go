package servicemodel

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/servicerules"
)

// EligibleNodes returns the eligible nodes (servicerules.NodeEligible) as provider backends,
// sorted by name.
func EligibleNodes(nodes []corev1.Node) []providers.Node {
	var out []providers.Node
	for i := range nodes {
		n := &nodes[i]
		if !servicerules.NodeEligible(n) {
			continue
		}
		out = append(out, providers.Node{Name: n.Name, ProviderID: n.Spec.ProviderID, Addresses: servicerules.NodeAddresses(n), Labels: n.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
