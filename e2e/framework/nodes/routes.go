package nodes

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// addRoutes adds what the lab leaves to its users for node n, in each of the cluster's
// families:
//   - in this (the root) namespace, n's pod CIDR via n, over the lab's root link, so that pods
//     (not only nodes) reach the apiserver and get its answers back; the routes lie inside the
//     lab's block, which the lab checked against every root route, and go away with the root
//     link;
//   - in n, the Service CIDR via the root address, so that a client on the node (hostNetwork)
//     gets a route before a service proxy's DNAT rewrites its packet, as on a real node with a
//     default route. The root end does not forward, so a packet nothing rewrote goes no
//     further.
func (c *Cluster) addRoutes(n *Node) error {
	rootLink, err := netlink.LinkByName(c.Lab.ID() + "-root")
	if err != nil {
		return fmt.Errorf("finding the lab's root link: %w", err)
	}
	for i, cidr := range n.PodCIDRs() {
		via := n.Addrs()[i]
		r := &netlink.Route{LinkIndex: rootLink.Attrs().Index, Dst: prefixNet(cidr), Gw: net.IP(via.AsSlice())}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("adding root route %s via %s: %w", cidr, via, err)
		}
	}
	err = n.Lab.Do(func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		for i, svc := range c.ServiceCIDRs() {
			via := c.RootAddr(c.families[i])
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: prefixNet(svc), Gw: net.IP(via.AsSlice())}); err != nil {
				return fmt.Errorf("%s via %s: %w", svc, via, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("adding the Service CIDR routes on %s: %w", n.Name, err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
