package servicerules

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Node labels and taints that take a node out of every load balancer, as upstream does.
const (
	// ExcludeFromLBLabel takes a node out of every load balancer (any value but "false").
	ExcludeFromLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"
	// ToBeDeletedTaint is set by the cluster autoscaler on a node it is removing.
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// NodeBeingDeleted reports whether n is going away: it has a deletionTimestamp or carries the
// ToBeDeletedByClusterAutoscaler taint. Load balancers drain such a node: the controller stops
// listing it as a backend and portico-agent's /healthz fails on it (KEP-3836).
func NodeBeingDeleted(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return true
		}
	}
	return false
}

// NodeEligible applies upstream's stable node-set rules: a node is a load-balancer backend unless
// it is being deleted (NodeBeingDeleted) or carries the exclude label (any value but "false").
// Readiness does not matter: health checks decide traffic.
func NodeEligible(n *corev1.Node) bool {
	if NodeBeingDeleted(n) {
		return false
	}
	if v, ok := n.Labels[ExcludeFromLBLabel]; ok && v != "false" {
		return false
	}
	return true
}

// IgnoreExcludeLabel removes ExcludeFromLBLabel from n (a copy the caller owns), for a
// controller or agent told to ignore the label (--ignore-exclude-lb, as MetalLB's flag of that
// name): applied to the Nodes as they are read, it makes every rule that follows (NodeEligible,
// the backend set, the announcers' election) treat labelled nodes as any other, the same way in
// portico-controller and portico-agent.
func IgnoreExcludeLabel(n *corev1.Node) {
	delete(n.Labels, ExcludeFromLBLabel)
}

// NodeAddresses are the addresses a load balancer reaches n on: its InternalIPs, or its
// ExternalIPs when it has no InternalIP. Unparsable addresses are skipped.
func NodeAddresses(n *corev1.Node) []netip.Addr {
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		var out []netip.Addr
		for _, a := range n.Status.Addresses {
			if a.Type != typ {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}
