package netlab

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// addRootLink joins the root namespace to the LAN: a veth "<id>-root" in the root namespace
// holding the LAN's .254 (only the connected /24 route results; IPv6 and forwarding are off on
// it; with Options.RootLink6 it also holds the LAN's ::254, without router advertisements,
// autoconfiguration or duplicate address detection) and its peer "root" on the switch's
// bridge. checkRootRoutes ran before anything was created.
func (l *Lab) addRootLink() error {
	name := l.id + "-root"
	swNS, err := netns.GetFromName(l.sw.NS)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", l.sw.NS, err)
	}
	defer swNS.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name},
		PeerName:      "root",
		PeerNamespace: netlink.NsFd(int(swNS)),
	}
	// This goroutine is not locked to a thread: it runs in the root namespace, like every
	// thread this package does not lock.
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating root link %s: %w", name, err)
	}
	// The root end answers ARP only for its own lab address and announces only that one, so
	// the machine's other addresses never show up on the LAN, and it does not forward what it
	// receives, so even a lab route via RootAddr cannot reach beyond the machine.
	sysctls := []sysctl{
		{"net.ipv6.conf." + name + ".disable_ipv6", "1"},
		{"net.ipv4.conf." + name + ".forwarding", "0"},
		{"net.ipv4.conf." + name + ".arp_ignore", "1"},
		{"net.ipv4.conf." + name + ".arp_announce", "2"},
	}
	if l.opts.RootLink6 {
		// IPv6 forwarding has no per-link switch: the root namespace's
		// net.ipv6.conf.all.forwarding stays as the machine has it (off on these machines).
		sysctls = append(sysctls[1:],
			sysctl{"net.ipv6.conf." + name + ".accept_ra", "0"},
			sysctl{"net.ipv6.conf." + name + ".autoconf", "0"},
			sysctl{"net.ipv6.conf." + name + ".accept_dad", "0"},
			sysctl{"net.ipv6.conf." + name + ".disable_ipv6", "0"})
	}
	err = writeSysctls(sysctls...)
	if err != nil {
		return fmt.Errorf("setting up root link: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding root link: %w", err)
	}
	addr := l.plan.lanAddr4(rootOctet)
	prefix := netip.PrefixFrom(addr, l.plan.lan4().Bits())
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(prefix)}); err != nil {
		return fmt.Errorf("adding address %s to root link: %w", prefix, err)
	}
	if l.opts.RootLink6 {
		addr6 := l.plan.lanAddr6(rootOctet)
		prefix6 := netip.PrefixFrom(addr6, l.plan.lan6().Bits())
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(prefix6), Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("adding address %s to root link: %w", prefix6, err)
		}
		l.rootAddr6 = addr6
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting root link up: %w", err)
	}
	if err := withHandle(l.sw.NS, func(h *netlink.Handle) error { return attachToBridge(h, "root") }); err != nil {
		return err
	}
	l.rootAddr = addr
	return nil
}

// checkRootRoutes refuses (ErrRootRouteOverlap) when a route of the root namespace, in any
// table, overlaps one of the lab's blocks.
func checkRootRoutes(blocks ...netip.Prefix) error {
	routes, err := rootRoutes()
	if err != nil {
		return err
	}
	if bad := overlappingRoutes(routes, blocks); len(bad) > 0 {
		return fmt.Errorf("%w: routes %v overlap lab blocks %v; refusing to add the root link", ErrRootRouteOverlap, bad, blocks)
	}
	return nil
}

// overlappingRoutes returns the route destinations that overlap any of blocks. Default routes
// are ignored: everything "overlaps" them, and the root link's connected /24 is more specific.
func overlappingRoutes(routes, blocks []netip.Prefix) []netip.Prefix {
	var bad []netip.Prefix
	for _, r := range routes {
		if r.Bits() == 0 {
			continue
		}
		for _, b := range blocks {
			if r.Overlaps(b) {
				bad = append(bad, r)
				break
			}
		}
	}
	return bad
}

// rootRoutes lists the destinations of the root namespace's routes in all tables, both
// families, default routes left out.
func rootRoutes() ([]netip.Prefix, error) {
	filter := &netlink.Route{Table: unix.RT_TABLE_UNSPEC}
	for range 3 {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_TABLE)
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing root routes: %w", err)
		}
		var dsts []netip.Prefix
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				return nil, fmt.Errorf("listing root routes: bad destination %v", r.Dst)
			}
			ones, _ := r.Dst.Mask.Size()
			dsts = append(dsts, netip.PrefixFrom(a.Unmap(), ones))
		}
		return dsts, nil
	}
	return nil, fmt.Errorf("listing root routes: %w", netlink.ErrDumpInterrupted)
}
