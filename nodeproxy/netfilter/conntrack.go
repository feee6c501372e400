package netfilter

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// Conntrack deletes conntrack entries; a seam over netlink.
type Conntrack interface {
	DeleteUDP(family rules.Family, stale *StaleUDP) (uint, error)
}

var _ Conntrack = NetlinkConntrack{}

// NetlinkConntrack is the Conntrack of the running kernel, over netlink.
type NetlinkConntrack struct{}

// DeleteUDP deletes the UDP entries of family that stale matches.
func (NetlinkConntrack) DeleteUDP(family rules.Family, stale *StaleUDP) (uint, error) {
	f := netlink.InetFamily(unix.AF_INET)
	if family == rules.IPv6 {
		f = unix.AF_INET6
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, f, stale)
	if err != nil {
		return n, fmt.Errorf("deleting stale UDP conntrack entries: %w", err)
	}
	return n, nil
}

// StaleUDP matches UDP conntrack entries that no longer lead where the rules send new packets:
// an entry whose original destination is a service address (or a NodePort) and whose reply
// does not come from one of that port's serving endpoints. That covers entries of removed
// endpoints and entries created while the port had no endpoint (no DNAT: the reply source is
// the service address itself). Traffic policies are ignored on purpose, as kube-proxy does.
type StaleUDP struct {
	byDest     map[netip.AddrPort]map[netip.Addr]bool
	byNodePort map[uint16]map[netip.Addr]bool
}

func newStaleUDP() *StaleUDP {
	return &StaleUDP{byDest: map[netip.AddrPort]map[netip.Addr]bool{}, byNodePort: map[uint16]map[netip.Addr]bool{}}
}

// add registers a UDP service port's destinations and serving endpoints.
func (s *StaleUDP) add(sp *rules.ServicePort) {
	if sp.Protocol != "udp" {
		return
	}
	serving := map[netip.Addr]bool{}
	for _, e := range sp.Endpoints {
		if e.Serving || e.Ready {
			serving[e.IP] = true
		}
	}
	dests := append([]netip.Addr{sp.ClusterIP}, sp.ExternalIPs...)
	for _, a := range append(dests, sp.LoadBalancerIPs...) {
		if a.IsValid() {
			s.byDest[netip.AddrPortFrom(a, sp.Port)] = serving
		}
	}
	if sp.NodePort != 0 {
		s.byNodePort[sp.NodePort] = serving
	}
}

func (s *StaleUDP) empty() bool { return len(s.byDest) == 0 && len(s.byNodePort) == 0 }

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (s *StaleUDP) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	dst, ok1 := addr(flow.Forward.DstIP)
	replySrc, ok2 := addr(flow.Reverse.SrcIP)
	if !ok1 || !ok2 {
		return false
	}
	if serving, ok := s.byDest[netip.AddrPortFrom(dst, flow.Forward.DstPort)]; ok {
		return !serving[replySrc]
	}
	if serving, ok := s.byNodePort[flow.Forward.DstPort]; ok {
		return !serving[replySrc]
	}
	return false
}

func addr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}

// NewStaleUDP returns an empty StaleUDP, for the other dataplane (package nftables), which
// deletes stale UDP entries the same way.
func NewStaleUDP() *StaleUDP { return newStaleUDP() }

// Add registers a UDP service port's destinations and serving endpoints (others are ignored).
func (s *StaleUDP) Add(sp *rules.ServicePort) { s.add(sp) }

// Empty reports whether s matches nothing.
func (s *StaleUDP) Empty() bool { return s.empty() }
