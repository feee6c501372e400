package netlab

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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

// NeighbourChange is one change of where a host's neighbour table sends an address's packets:
// the MAC from At on, "" when the host has no usable entry.
type NeighbourChange struct {
	At   time.Time
	Addr netip.Addr
	MAC  string
}

// NeighbourWatch samples a host's neighbour entries of some addresses and records every change
// (the first sample of each address included): which node a layer-2 client reaches a VIP on,
// and when that moved.
type NeighbourWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	changes []NeighbourChange
}

// WatchNeighbours starts sampling, every interval, the neighbour entries of addrs in network
// namespace ns (a host's NS); Stop ends it. It is stopped at the end of t too.
func WatchNeighbours(t testing.TB, ns string, addrs []netip.Addr, every time.Duration) *NeighbourWatch {
	t.Helper()
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatalf("watching neighbours in %s: %v", ns, err)
	}
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	nsh.Close()
	if err != nil {
		t.Fatalf("watching neighbours in %s: %v", ns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &NeighbourWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer h.Close()
		last := map[netip.Addr]string{}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for _, a := range addrs {
				mac := ""
				if m := Neighbour(h, a); m != nil {
					mac = m.String()
				}
				if prev, ok := last[a]; !ok || prev != mac {
					w.changes = append(w.changes, NeighbourChange{At: time.Now(), Addr: a, MAC: mac})
					last[a] = mac
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return w
}

// Stop ends the sampling (again: a no-op) and returns the changes seen, in order.
func (w *NeighbourWatch) Stop() []NeighbourChange {
	w.cancel()
	<-w.done
	return slices.Clone(w.changes)
}

// MACs returns the distinct MACs addr was sent to in changes, sorted (times without a usable
// entry are left out).
func MACs(changes []NeighbourChange, addr netip.Addr) []string {
	var out []string
	for _, c := range changes {
		if c.Addr == addr && c.MAC != "" && !slices.Contains(out, c.MAC) {
			out = append(out, c.MAC)
		}
	}
	slices.Sort(out)
	return out
}
