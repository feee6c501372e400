package netlab

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Neighbour returns the usable (not failed, not incomplete) neighbour entry for v in the
// namespace h is a netlink handle of, or nil: the MAC a host sends v's packets to, which is how
// the layer-2 suites see which node announces a VIP.
func Neighbour(h *netlink.Handle, v netip.Addr) net.HardwareAddr {
	fam := netlink.FAMILY_V4
	if v.Is6() {
		fam = netlink.FAMILY_V6
	}
	ns, err := h.NeighList(0, fam)
	if err != nil {
		return nil
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == v && n.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) == 0 {
			return n.HardwareAddr
		}
	}
	return nil
}
