package router

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// KernelNextHops returns the gateways of the main-table routes for exactly prefix in h's
// kernel, sorted: what packets to prefix meet, as opposed to what bird holds. Bird's kernel
// protocol copies its table into the kernel asynchronously, so a test that means "traffic to
// the VIP now takes these paths" waits for this, not for `birdc show route`.
func KernelNextHops(h *netlab.Host, prefix netip.Prefix) ([]netip.Addr, error) {
	target, err := netns.GetFromName(h.NS)
	if err != nil {
		return nil, fmt.Errorf("opening namespace %s: %w", h.NS, err)
	}
	defer target.Close()
	nh, err := netlink.NewHandleAt(target, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening netlink in %s: %w", h.NS, err)
	}
	defer nh.Close() // an open netlink socket would keep a deleted namespace alive
	family := netlink.FAMILY_V4
	if prefix.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	prefix = prefix.Masked()
	dst := &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}
	routes, err := nh.RouteListFiltered(family, &netlink.Route{Dst: dst, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing %s's kernel routes for %s: %w", h.Name, prefix, err)
	}
	var hops []netip.Addr
	add := func(gw net.IP) {
		if a, ok := netip.AddrFromSlice(gw); ok {
			hops = append(hops, a.Unmap())
		}
	}
	for _, r := range routes {
		// RT_FILTER_DST also passes the default route for a zero prefix; keep exact matches.
		if r.Dst == nil || r.Dst.String() != dst.String() {
			continue
		}
		add(r.Gw)
		for _, p := range r.MultiPath {
			add(p.Gw)
		}
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return hops, nil
}
