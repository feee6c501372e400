package netlab

import (
	"fmt"
	"net/netip"
	"regexp"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// podName keeps pod names usable in namespace names and as echo server names.
var podName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// AddPod adds a pod namespace named name (unique in the lab; lower-case letters, digits and
// dashes) to n, failing t on error. The pod lives until the lab closes.
//
// The pod is wired as Calico wires one: eth0 holds the pod IP as a /32 (/128), the default
// route goes via the link-local gateway 169.254.1.1 (fe80::1) onlink, and the node answers for
// that gateway on its end of the veth (proxy ARP; for IPv6 it owns fe80::1) and routes the pod
// IP to that veth. Other LAN hosts already route n.PodCIDR via n. The pod's default route is
// the only one in the lab, and leads to a node that has none.
func (n *Node) AddPod(t testing.TB, name string) *Pod {
	t.Helper()
	p, err := n.addPod(name)
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	return p
}

// AddPodE is AddPod for programs that are not tests (e.g. the demo): it returns the error
// instead of failing a test. The pod lives until the lab closes.
func (n *Node) AddPodE(name string) (*Pod, error) { return n.addPod(name) }

// Pods returns the pods added to n so far.
func (n *Node) Pods() []*Pod {
	n.lab.mu.Lock()
	defer n.lab.mu.Unlock()
	return append([]*Pod(nil), n.pods...)
}

func (n *Node) addPod(name string) (*Pod, error) {
	l := n.lab
	if !podName.MatchString(name) {
		return nil, fmt.Errorf("invalid pod name %q", name)
	}
	p, err := n.reservePod(name)
	if err != nil {
		return nil, err
	}
	defer l.leave()
	if err := l.setupPod(p); err != nil {
		return nil, fmt.Errorf("adding pod %s to %s: %w", name, n.Name, err)
	}
	return p, nil
}

// reservePod assigns the pod its number and addresses, and enters the lab (the caller leaves).
func (n *Node) reservePod(name string) (*Pod, error) {
	l := n.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("lab %s is closed", l.id)
	}
	if l.podNames[name] {
		return nil, fmt.Errorf("pod %q already exists in the lab", name)
	}
	if len(n.pods) >= maxPodsPerNode {
		return nil, fmt.Errorf("node %s already has %d pods", n.Name, maxPodsPerNode)
	}
	j := len(n.pods) + 1
	p := &Pod{
		Host:     Host{Name: name, NS: l.nsName(n.Name + "-" + name), Addr: l.plan.podAddr4(n.index, j), lab: l},
		Node:     n,
		HostVeth: fmt.Sprintf("veth%d", j),
	}
	if l.opts.IPv6 {
		p.Addr6 = l.plan.podAddr6(n.index, j)
	}
	l.podNames[name] = true
	n.pods = append(n.pods, p)
	l.busy.Add(1)
	return p, nil
}

func (l *Lab) setupPod(p *Pod) error {
	if err := createNamespace(p.NS); err != nil {
		return err
	}
	if err := inNamespace(p.NS, func() error { return writeSysctls(commonSysctls()...) }); err != nil {
		return err
	}
	if err := l.setupPodNodeSide(p); err != nil {
		return err
	}
	return withHandle(p.NS, func(h *netlink.Handle) error {
		if err := linkUp(h, "lo"); err != nil {
			return err
		}
		eth0, err := h.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("finding eth0: %w", err)
		}
		if err := addAddr(h, eth0, netip.PrefixFrom(p.Addr, 32)); err != nil {
			return err
		}
		if p.Addr6.IsValid() {
			if err := addAddr(h, eth0, netip.PrefixFrom(p.Addr6, 128)); err != nil {
				return err
			}
		}
		if err := h.LinkSetUp(eth0); err != nil {
			return fmt.Errorf("setting eth0 up: %w", err)
		}
		gw := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: podGateway4.AsSlice(), Flags: int(netlink.FLAG_ONLINK)}
		if err := h.RouteAdd(gw); err != nil {
			return fmt.Errorf("adding default route via %s: %w", podGateway4, err)
		}
		if p.Addr6.IsValid() {
			gw6 := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: podGateway6.AsSlice()}
			if err := h.RouteAdd(gw6); err != nil {
				return fmt.Errorf("adding default route via %s: %w", podGateway6, err)
			}
		}
		return nil
	})
}

// setupPodNodeSide creates the pod veth from the node (the pod's end becomes its eth0) and sets
// up the node's end: proxy ARP without delay, fe80::1, and routes to the pod IPs.
func (l *Lab) setupPodNodeSide(p *Pod) error {
	podNS, err := netns.GetFromName(p.NS)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", p.NS, err)
	}
	defer podNS.Close()
	n := p.Node
	err = withHandle(n.NS, func(h *netlink.Handle) error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: p.HostVeth},
			PeerName:      "eth0",
			PeerNamespace: netlink.NsFd(int(podNS)),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("creating veth %s: %w", p.HostVeth, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = inNamespace(n.NS, func() error {
		return writeSysctls(
			sysctl{"net.ipv4.conf." + p.HostVeth + ".proxy_arp", "1"},
			sysctl{"net.ipv4.neigh." + p.HostVeth + ".proxy_delay", "0"},
		)
	})
	if err != nil {
		return err
	}
	return withHandle(n.NS, func(h *netlink.Handle) error {
		veth, err := h.LinkByName(p.HostVeth)
		if err != nil {
			return fmt.Errorf("finding %s: %w", p.HostVeth, err)
		}
		if p.Addr6.IsValid() {
			if err := addAddr(h, veth, netip.PrefixFrom(podGateway6, 64)); err != nil {
				return err
			}
		}
		if err := h.LinkSetUp(veth); err != nil {
			return fmt.Errorf("setting %s up: %w", p.HostVeth, err)
		}
		if err := addRoute(h, veth, netip.PrefixFrom(p.Addr, 32), netip.Addr{}); err != nil {
			return err
		}
		if p.Addr6.IsValid() {
			if err := addRoute(h, veth, netip.PrefixFrom(p.Addr6, 128), netip.Addr{}); err != nil {
				return err
			}
		}
		return nil
	})
}
