package serviceports

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// applyTopology follows the EndpointSlice controller's topology hints (trafficDistribution,
// the topology-mode annotation) as kube-proxy does: when every ready endpoint has node hints
// and one names this node, cluster-wide traffic from this node goes to those endpoints only;
// otherwise, when every ready endpoint has zone hints and one names this node's zone, to
// those; otherwise to all. Endpoints left out are marked OtherTopology; terminating fallbacks
// and the Local policies ignore hints.
func applyTopology(eps []rules.Endpoint, hints []*discoveryv1.EndpointHints, node Node) {
	allNodes, forNode, allZones, forZone := true, false, true, false
	for i, e := range eps {
		if !e.Ready {
			continue
		}
		h := hints[i]
		if h == nil || len(h.ForNodes) == 0 {
			allNodes = false
		} else if hintsNode(h, node.Name) {
			forNode = true
		}
		if h == nil || len(h.ForZones) == 0 {
			allZones = false
		} else if hintsZone(h, node.Zone) {
			forZone = true
		}
	}
	var keep func(h *discoveryv1.EndpointHints) bool
	switch {
	case allNodes && forNode:
		keep = func(h *discoveryv1.EndpointHints) bool { return hintsNode(h, node.Name) }
	case allZones && forZone:
		keep = func(h *discoveryv1.EndpointHints) bool { return hintsZone(h, node.Zone) }
	default:
		return
	}
	for i := range eps {
		if eps[i].Ready && !keep(hints[i]) {
			eps[i].OtherTopology = true
		}
	}
}

func hintsNode(h *discoveryv1.EndpointHints, name string) bool {
	for _, n := range h.ForNodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

func hintsZone(h *discoveryv1.EndpointHints, zone string) bool {
	for _, z := range h.ForZones {
		if zone != "" && z.Name == zone {
			return true
		}
	}
	return false
}
