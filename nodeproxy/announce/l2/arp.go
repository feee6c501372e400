package l2

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// arpResponder answers ARP requests for the interface's IPv4 VIPs from an AF_PACKET socket
// (mdlayher/arp), with the interface's own MAC. The kernel never owns the VIPs.
type arpResponder struct {
	i *iface
	c *arp.Client
}

func openARP(i *iface) (*arpResponder, error) {
	// arp.Dial needs an IPv4 address on the interface (it is not used for our replies).
	c, err := arp.Dial(i.ifi)
	if err != nil {
		return nil, err
	}
	return &arpResponder{i: i, c: c}, nil
}

func (r *arpResponder) close() { r.c.Close() }

// serve answers requests until the socket is closed (nil) or fails.
func (r *arpResponder) serve() error {
	mac := r.i.ifi.HardwareAddr
	for {
		p, eth, err := r.c.Read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var opErr *net.OpError
			if errors.As(err, &opErr) {
				return fmt.Errorf("reading ARP: %w", err)
			}
			continue // a malformed packet
		}
		if p.Operation != arp.OperationRequest || bytes.Equal(p.SenderHardwareAddr, mac) {
			continue
		}
		// Broadcast requests, and unicast ones (cache refreshes) sent to this node.
		if !bytes.Equal(eth.Destination, ethernet.Broadcast) && !bytes.Equal(eth.Destination, mac) {
			continue
		}
		target, ok := netip.AddrFromSlice(p.TargetIP)
		if !ok || !r.i.has(target.Unmap()) {
			continue
		}
		if err := r.c.Reply(p, mac, p.TargetIP); err != nil {
			r.i.log.Error(err, "Replying to ARP request", "vip", target.Unmap(), "from", p.SenderIP.String())
			continue
		}
		r.i.log.V(2).Info("Answered ARP request", "vip", target.Unmap(), "from", p.SenderIP.String())
	}
}

// gratuitous broadcasts a gratuitous ARP request and reply for vip (sender and target IP both
// vip, sender MAC ours), as clients differ in which of the two updates their caches.
func (r *arpResponder) gratuitous(vip netip.Addr) error {
	mac := r.i.ifi.HardwareAddr
	ip := net.IP(vip.AsSlice())
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		p, err := arp.NewPacket(op, mac, ip, ethernet.Broadcast, ip)
		if err != nil {
			return fmt.Errorf("building gratuitous ARP: %w", err)
		}
		if err := r.c.WriteTo(p, ethernet.Broadcast); err != nil {
			return fmt.Errorf("sending gratuitous ARP: %w", err)
		}
	}
	return nil
}
