package nodeproxy

import (
	"context"
	"net/netip"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// The IP families the agent programs follow its Node's addresses (InternalIP and ExternalIP),
// without a restart:
//
//   - at start, the families of the Node's addresses (IPv4 while the Node is unknown or has
//     none);
//   - a family the Node gains an address of is programmed from the next sync on (every change
//     of the Node's addresses brings a full sync);
//   - a family is removed, its rules deleted from the kernel, only when the Node still has
//     addresses, none of that family, and no pod on this node has an endpoint address of it
//     (no EndpointSlice of the family lists an endpoint on this node). A Node update that
//     transiently lists no address at all changes nothing, and one that misses a family while
//     pods here still use it keeps that family's rules: they go at the first full sync (every
//     --sync-period) after its last local endpoint went.
//
// The health-check servers count local endpoints of the families programmed, and listen where
// those families' NodePorts answer, on every sync.

// nodeFamilies are the IP families of the Node's InternalIP and ExternalIP addresses, IPv4
// first; none when the Node is unknown or has no such address.
func nodeFamilies(n *corev1.Node) []rules.Family {
	if n == nil {
		return nil
	}
	has := map[rules.Family]bool{}
	for _, ad := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(ad.Address); err == nil && (ad.Type == corev1.NodeInternalIP || ad.Type == corev1.NodeExternalIP) {
			has[familyOf(ip)] = true
		}
	}
	var out []rules.Family
	for _, f := range []rules.Family{rules.IPv4, rules.IPv6} {
		if has[f] {
			out = append(out, f)
		}
	}
	return out
}

// nextFamilies are the families to program after have, given the Node's (node) and whether a
// pod on this node has an endpoint of a family (inUse, asked only of a family about to go):
// see the rules above.
func nextFamilies(have, node []rules.Family, inUse func(rules.Family) bool) []rules.Family {
	if len(node) == 0 {
		return have
	}
	var out []rules.Family
	for _, f := range []rules.Family{rules.IPv4, rules.IPv6} {
		if slices.Contains(node, f) || (slices.Contains(have, f) && inUse(f)) {
			out = append(out, f)
		}
	}
	return out
}

// localEndpointsOf reports whether an EndpointSlice of family f of a Service of st (all of
// them on a full sync) lists an endpoint on this node.
func localEndpointsOf(st *tracker.State, f rules.Family) bool {
	want := discoveryv1.AddressTypeIPv4
	if f == rules.IPv6 {
		want = discoveryv1.AddressTypeIPv6
	}
	for _, key := range st.Changed {
		_, eps, err := st.Service(key)
		if err != nil {
			return true // unknown: keep the family
		}
		for _, s := range eps {
			if s.AddressType != want {
				continue
			}
			for _, e := range s.Endpoints {
				if e.NodeName != nil && *e.NodeName == st.NodeName {
					return true
				}
			}
		}
	}
	return false
}

// familyProgrammer is what following the Node needs of a dataplane.
type familyProgrammer interface {
	Families() []rules.Family
	SetFamilies([]rules.Family) error
}

// followNode is the dataplane as a sync loop consumer whose families follow the Node: on every
// full sync (every change of the Node's addresses is one) it sets the families nextFamilies
// says before the dataplane syncs. A family that cannot be added (iptables mode without
// ip6tables) is logged and the dataplane keeps its families; the next full sync tries again.
type followNode struct {
	dataplane
	// forget is told the families dropped (ProxyHealth.ForgetFamily).
	forget func(rules.Family)
	// failed is the family set whose SetFamilies last failed (logged once until it changes).
	failed []rules.Family
}

func (d *followNode) Sync(ctx context.Context, st *tracker.State) error {
	if st.Full {
		d.follow(logr.FromContextOrDiscard(ctx), st)
	}
	return d.dataplane.Sync(ctx, st)
}

func (d *followNode) follow(log logr.Logger, st *tracker.State) {
	have := d.Families()
	want := nextFamilies(have, nodeFamilies(st.Node), func(f rules.Family) bool { return localEndpointsOf(st, f) })
	if slices.Equal(want, have) {
		d.failed = nil
		return
	}
	if err := d.SetFamilies(want); err != nil {
		if !slices.Equal(want, d.failed) {
			log.Error(err, "Cannot program the IP families of the Node's addresses; keeping the current ones",
				"families", familyNames(have), "nodeFamilies", familyNames(want))
		}
		d.failed = want
		return
	}
	d.failed = nil
	for _, f := range have {
		if !slices.Contains(want, f) {
			d.forget(f)
		}
	}
	log.Info("IP families follow the Node's addresses", "from", familyNames(have), "to", familyNames(want))
}

func familyNames(fs []rules.Family) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func familyOf(ip netip.Addr) rules.Family {
	if ip.Is4() || ip.Is4In6() {
		return rules.IPv4
	}
	return rules.IPv6
}
