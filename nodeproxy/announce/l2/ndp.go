package l2

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// ndpResponder answers neighbour solicitations for the interface's IPv6 VIPs from a raw ICMPv6
// socket bound to the interface's link-local address (mdlayher/ndp). Solicitations are sent to
// the target's solicited-node multicast group, which the socket joins per VIP (VIPs sharing the
// low 24 bits share a group, hence the counts).
type ndpResponder struct {
	i      *iface
	c      *ndp.Conn
	groups map[netip.Addr]int // guarded by i.mu
}

var allNodes = netip.MustParseAddr("ff02::1")

func openNDP(i *iface) (*ndpResponder, error) {
	c, _, err := ndp.Listen(i.ifi, ndp.LinkLocal)
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeNeighborSolicitation)
	if err := c.SetICMPFilter(&f); err != nil {
		c.Close()
		return nil, fmt.Errorf("setting ICMPv6 filter: %w", err)
	}
	return &ndpResponder{i: i, c: c, groups: map[netip.Addr]int{}}, nil
}

func (r *ndpResponder) close() { r.c.Close() }

func (r *ndpResponder) join(vip netip.Addr) error {
	g, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return err
	}
	if r.groups[g] == 0 {
		if err := r.c.JoinGroup(g); err != nil {
			return fmt.Errorf("joining %s for %s: %w", g, vip, err)
		}
	}
	r.groups[g]++
	return nil
}

func (r *ndpResponder) leave(vip netip.Addr) error {
	g, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return err
	}
	r.groups[g]--
	if r.groups[g] > 0 {
		return nil
	}
	delete(r.groups, g)
	if err := r.c.LeaveGroup(g); err != nil {
		return fmt.Errorf("leaving %s for %s: %w", g, vip, err)
	}
	return nil
}

// serve answers solicitations until the socket is closed (nil) or fails.
func (r *ndpResponder) serve() error {
	for {
		m, _, src, err := r.c.ReadFrom()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading NDP: %w", err)
		}
		ns, ok := m.(*ndp.NeighborSolicitation)
		if !ok || !r.i.has(ns.TargetAddress) {
			continue
		}
		// A solicitation from the unspecified address (duplicate address detection) is
		// answered to all nodes, unsolicited (RFC 4861 7.2.4).
		dst, solicited := src, true
		if src.WithZone("").IsUnspecified() {
			dst, solicited = allNodes, false
		}
		if err := r.advertise(ns.TargetAddress, dst, solicited); err != nil {
			r.i.log.Error(err, "Answering neighbour solicitation", "vip", ns.TargetAddress, "from", src)
			continue
		}
		r.i.log.V(2).Info("Answered neighbour solicitation", "vip", ns.TargetAddress, "from", src)
	}
}

// unsolicited sends an unsolicited neighbour advertisement for vip to all nodes, with the
// override flag so that existing cache entries take our MAC.
func (r *ndpResponder) unsolicited(vip netip.Addr) error { return r.advertise(vip, allNodes, false) }

func (r *ndpResponder) advertise(vip, dst netip.Addr, solicited bool) error {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: vip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{
			Direction: ndp.Target,
			Addr:      r.i.ifi.HardwareAddr,
		}},
	}
	if err := r.c.WriteTo(na, nil, dst); err != nil {
		return fmt.Errorf("sending neighbour advertisement: %w", err)
	}
	return nil
}
