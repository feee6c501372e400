package netlab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/portico-lb/portico/internal/prereq"
)

// Options describe a lab's topology.
type Options struct {
	// Nodes is the number of node namespaces, node1..nodeN (at most 12).
	Nodes int
	// Clients is the number of client namespaces on the LAN, client1..clientN (at most 99).
	Clients int
	// Router adds a "router" namespace on the LAN with forwarding on, e.g. to run a BGP peer.
	Router bool
	// RootLink joins this process's (the root) namespace to the LAN at Lab.RootAddr, e.g. for a
	// kube-apiserver the nodes must reach. New refuses when a root route overlaps the lab.
	RootLink bool
	// IPv6 adds IPv6 addresses and routes next to the IPv4 ones (the root link stays IPv4
	// unless RootLink6).
	IPv6 bool
	// RootLink6 (with RootLink and IPv6) gives the root link the LAN's IPv6 address too
	// (Lab.RootAddr6), e.g. for an apiserver of an IPv6-first cluster.
	RootLink6 bool
	// Logf receives lab and process log lines. New defaults it to t.Logf; NewE discards.
	Logf func(format string, args ...any)
}

func (o Options) validate() error {
	switch {
	case o.Nodes < 0 || o.Nodes > maxNodes:
		return fmt.Errorf("nodes: %d not in 0..%d", o.Nodes, maxNodes)
	case o.Clients < 0 || o.Clients > maxClients:
		return fmt.Errorf("clients: %d not in 0..%d", o.Clients, maxClients)
	case o.RootLink6 && (!o.RootLink || !o.IPv6):
		return fmt.Errorf("root link IPv6 needs the root link and IPv6")
	}
	return nil
}

// ErrRootRouteOverlap is returned (wrapped) when a route of the root namespace overlaps the
// lab's addresses, so adding the root link could hijack traffic of the machine.
var ErrRootRouteOverlap = errors.New("root namespace route overlaps the lab")

// Lab is a running topology of network namespaces. Close (or the test's end, with New) removes
// all of it.
type Lab struct {
	id   string // set once the owner record exists; names start with id + "-"
	plan plan
	opts Options
	logf func(string, ...any)

	slotLock  *os.File // flock on slot-N.lock
	ownerFile *os.File // flock on lab-<id>

	sw        *Host
	router    *Host
	nodes     []*Node
	clients   []*Host
	rootAddr  netip.Addr
	rootAddr6 netip.Addr

	mu       sync.Mutex
	closed   bool
	busy     sync.WaitGroup // AddPod and Start calls in flight; Close waits for them
	procs    []*Process
	podNames map[string]bool

	closeOnce sync.Once
	closeErr  error
}

// Supported returns why labs cannot run on this machine, or nil: they need root and `ip`. The
// error (a *prereq.Missing) names the fix.
func Supported() error {
	return prereq.Host().Check(true, prereq.IPRoute2)
}

// New builds a lab for a test: it fails t, naming the fix, when Supported fails (or skips t
// when PORTICO_SKIP_PRIVILEGED=1 allows it), fails t when the lab cannot be built, and closes
// the lab when t ends.
func New(t testing.TB, opts Options) *Lab {
	t.Helper()
	prereq.RequireRoot(t, prereq.IPRoute2)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	l, err := NewE(opts)
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("netlab: %v", err)
		}
	})
	return l
}

// NewE builds a lab; the caller must Close it. It first sweeps labs of dead processes, then
// takes a free slot (waiting while all are busy).
func NewE(opts Options) (*Lab, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("invalid lab options: %w", err)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := Sweep(); err != nil {
		// Leftovers of other runs do not block this lab: names and slots differ, and the
		// root link refuses overlapping routes.
		logf("netlab: %v", err)
	}
	slot, lock, err := acquireSlot(logf)
	if err != nil {
		return nil, err
	}
	l := &Lab{plan: plan{slot: slot}, opts: opts, logf: logf, slotLock: lock, podNames: map[string]bool{}}
	if err := l.build(); err != nil {
		return nil, errors.Join(fmt.Errorf("building lab: %w", err), l.Close())
	}
	logf("netlab: lab %s in slot %d: LAN %s, %d nodes, %d clients, router %v, root link %v, IPv6 %v",
		l.id, slot, l.LANPrefix(), opts.Nodes, opts.Clients, opts.Router, opts.RootLink, opts.IPv6)
	return l, nil
}

func (l *Lab) build() error {
	if l.opts.RootLink {
		if err := checkRootRoutes(l.plan.block4(), l.plan.block6()); err != nil {
			return err
		}
	}
	if err := l.claimID(); err != nil {
		return err
	}
	if err := l.addSwitch(); err != nil {
		return err
	}
	if l.opts.Router {
		h, err := l.addLANHost("router", routerOctet, 0, true)
		if err != nil {
			return err
		}
		l.router = h
	}
	for i := 1; i <= l.opts.Nodes; i++ {
		n, err := l.addNode(i)
		if err != nil {
			return err
		}
		l.nodes = append(l.nodes, n)
	}
	for i := 1; i <= l.opts.Clients; i++ {
		h, err := l.addLANHost(fmt.Sprintf("client%d", i), clientOct0+i, 0, false)
		if err != nil {
			return err
		}
		l.clients = append(l.clients, h)
	}
	if l.opts.RootLink {
		return l.addRootLink()
	}
	return nil
}

// claimID picks an unused id and records this process as its owner.
func (l *Lab) claimID() error {
	for range 5 {
		id, err := newID()
		if err != nil {
			return err
		}
		f, err := createOwnerFile(id, l.plan.slot)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		l.id, l.ownerFile = id, f
		return nil
	}
	return errors.New("no unused lab id after 5 tries")
}

func (l *Lab) nsName(name string) string { return l.id + "-" + name }

// addSwitch creates the switch namespace with bridge br0, a pure L2 device: IPv6 is off there
// (no link-local chatter of its own) and multicast snooping is off (NDP works without an MLD
// querier).
func (l *Lab) addSwitch() error {
	ns := l.nsName("switch")
	if err := createNamespace(ns); err != nil {
		return err
	}
	l.sw = &Host{Name: "switch", NS: ns, lab: l}
	err := inNamespace(ns, func() error {
		return writeSysctls(
			sysctl{"net.ipv6.conf.all.disable_ipv6", "1"},
			sysctl{"net.ipv6.conf.default.disable_ipv6", "1"},
		)
	})
	if err != nil {
		return err
	}
	return withHandle(ns, func(h *netlink.Handle) error {
		if err := linkUp(h, "lo"); err != nil {
			return err
		}
		off := false
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}, MulticastSnooping: &off}
		if err := h.LinkAdd(br); err != nil {
			return fmt.Errorf("creating bridge: %w", err)
		}
		return linkUp(h, "br0")
	})
}

// addNode adds node i: a LAN host with forwarding, plus the host route that lets proxy ARP
// answer for the pods' gateway (see setupPod).
func (l *Lab) addNode(i int) (*Node, error) {
	h, err := l.addLANHost(fmt.Sprintf("node%d", i), nodeOctet0+i, i, true)
	if err != nil {
		return nil, err
	}
	n := &Node{Host: *h, PodCIDR: l.plan.podCIDR4(i), index: i}
	if l.opts.IPv6 {
		n.PodCIDR6 = l.plan.podCIDR6(i)
	}
	err = withHandle(n.NS, func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("finding lo: %w", err)
		}
		// Proxy ARP only answers for targets routed (unicast) out of another interface; nodes
		// have no default route, so the gateway gets a host route of its own.
		r := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: ipNet(netip.PrefixFrom(podGateway4, 32)), Scope: netlink.SCOPE_LINK}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("adding pod gateway route: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("setting up %s: %w", n.Name, err)
	}
	return n, nil
}

// addLANHost creates a namespace with eth0 on the LAN at the given octet, plugged into the
// switch, forwarding if asked (nodes, router). Every host routes each node's pod CIDRs via that
// node, except node selfNode (0 for non-nodes) its own.
func (l *Lab) addLANHost(name string, octet, selfNode int, forwarding bool) (*Host, error) {
	ns := l.nsName(name)
	if err := createNamespace(ns); err != nil {
		return nil, err
	}
	h := &Host{Name: name, NS: ns, Addr: l.plan.lanAddr4(octet), lab: l}
	if l.opts.IPv6 {
		h.Addr6 = l.plan.lanAddr6(octet)
	}
	if err := inNamespace(ns, func() error { return writeSysctls(l.hostSysctls(forwarding)...) }); err != nil {
		return nil, fmt.Errorf("setting up %s: %w", name, err)
	}
	if err := l.plugIntoSwitch(ns, name); err != nil {
		return nil, fmt.Errorf("setting up %s: %w", name, err)
	}
	err := withHandle(ns, func(nh *netlink.Handle) error {
		if err := linkUp(nh, "lo"); err != nil {
			return err
		}
		eth0, err := nh.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("finding eth0: %w", err)
		}
		if err := addAddr(nh, eth0, netip.PrefixFrom(h.Addr, l.plan.lan4().Bits())); err != nil {
			return err
		}
		if h.Addr6.IsValid() {
			if err := addAddr(nh, eth0, netip.PrefixFrom(h.Addr6, l.plan.lan6().Bits())); err != nil {
				return err
			}
		}
		if err := nh.LinkSetUp(eth0); err != nil {
			return fmt.Errorf("setting eth0 up: %w", err)
		}
		for i := 1; i <= l.opts.Nodes; i++ {
			if i == selfNode {
				continue
			}
			via := l.plan.lanAddr4(nodeOctet0 + i)
			if err := addRoute(nh, eth0, l.plan.podCIDR4(i), via); err != nil {
				return err
			}
			if l.opts.IPv6 {
				if err := addRoute(nh, eth0, l.plan.podCIDR6(i), l.plan.lanAddr6(nodeOctet0+i)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("setting up %s: %w", name, err)
	}
	return h, nil
}

// hostSysctls are the settings of a LAN host namespace, written before its interfaces exist so
// that "default" reaches them: commonSysctls, plus forwarding for nodes and the router, which
// send no ICMP redirects (a forwarding hop is never optimized away behind a test's back).
func (l *Lab) hostSysctls(forwarding bool) []sysctl {
	var s []sysctl
	if forwarding {
		// ip_forward first: writing it resets per-interface forwarding settings.
		s = append(s,
			sysctl{"net.ipv4.ip_forward", "1"},
			sysctl{"net.ipv4.conf.all.send_redirects", "0"},
			sysctl{"net.ipv4.conf.default.send_redirects", "0"},
		)
		if l.opts.IPv6 {
			s = append(s, sysctl{"net.ipv6.conf.all.forwarding", "1"})
		}
	}
	return append(s, commonSysctls()...)
}

// commonSysctls apply to every host and pod namespace. Reverse-path filtering is off (load
// balancing makes asymmetric paths normal), redirects are ignored, and IPv6 duplicate address
// detection is off: a pod's link-local address stays tentative for a second or two otherwise,
// and the first connections forwarded for the pod meanwhile lose their SYN (seen as a 2s stall).
func commonSysctls() []sysctl {
	return []sysctl{
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.ipv4.conf.all.accept_redirects", "0"},
		{"net.ipv4.conf.default.accept_redirects", "0"},
		{"net.ipv6.conf.all.accept_redirects", "0"},
		{"net.ipv6.conf.default.accept_redirects", "0"},
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
	}
}

// plugIntoSwitch creates a veth with end port on br0 in the switch and end eth0 in hostNS.
func (l *Lab) plugIntoSwitch(hostNS, port string) error {
	target, err := netns.GetFromName(hostNS)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", hostNS, err)
	}
	defer target.Close()
	return withHandle(l.sw.NS, func(h *netlink.Handle) error {
		// Created from the namespace of its main end, so the library's name lookups after
		// LinkAdd resolve there and not in another namespace that has a link of that name.
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: port},
			PeerName:      "eth0",
			PeerNamespace: netlink.NsFd(int(target)),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("creating veth %s: %w", port, err)
		}
		return attachToBridge(h, port)
	})
}

func attachToBridge(h *netlink.Handle, port string) error {
	br, err := h.LinkByName("br0")
	if err != nil {
		return fmt.Errorf("finding br0: %w", err)
	}
	link, err := h.LinkByName(port)
	if err != nil {
		return fmt.Errorf("finding switch port %s: %w", port, err)
	}
	if err := h.LinkSetMaster(link, br); err != nil {
		return fmt.Errorf("attaching %s to br0: %w", port, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", port, err)
	}
	return nil
}

// Close stops the lab's processes and removes its namespaces, its root link and its records,
// then releases its slot. It is idempotent.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Lab) close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.busy.Wait()

	var errs []error
	for _, p := range l.procs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if l.id != "" {
		if err := teardown(l.id); err != nil {
			// Keep the owner record: Sweep retries once this process is gone.
			errs = append(errs, err)
		} else if err := os.Remove(ownerPath(l.id)); err != nil {
			errs = append(errs, fmt.Errorf("removing owner record: %w", err))
		}
	}
	if l.ownerFile != nil {
		l.ownerFile.Close()
	}
	l.slotLock.Close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing lab %s: %w", l.id, err)
	}
	return nil
}

// enter registers an operation that creates lab resources; it fails once Close has begun.
func (l *Lab) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("lab %s is closed", l.id)
	}
	l.busy.Add(1)
	return nil
}

func (l *Lab) leave() { l.busy.Done() }

func (l *Lab) addProcess(p *Process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.procs = append(l.procs, p)
}

// ID is the lab id; every namespace and root link of the lab is named ID()+"-...".
func (l *Lab) ID() string { return l.id }

// Slot is the lab's slot, 0..15; it fixes the lab's addresses (see doc.go).
func (l *Lab) Slot() int { return l.plan.slot }

// Nodes returns node1..nodeN.
func (l *Lab) Nodes() []*Node { return l.nodes }

// Clients returns client1..clientN.
func (l *Lab) Clients() []*Host { return l.clients }

// Router returns the router, or nil without Options.Router.
func (l *Lab) Router() *Host { return l.router }

// Switch returns the switch namespace; it has no addresses and holds the LAN bridge br0, with
// one port per LAN host named after it ("node1", "client1", "router", "root").
func (l *Lab) Switch() *Host { return l.sw }

// RootAddr is this process's address on the LAN, or the zero Addr without Options.RootLink.
// Bind a server the nodes must reach (kube-apiserver --bind-address) to it.
func (l *Lab) RootAddr() netip.Addr { return l.rootAddr }

// RootAddr6 is the root link's IPv6 address (Options.RootLink6), or the zero Addr.
func (l *Lab) RootAddr6() netip.Addr { return l.rootAddr6 }

// LANPrefix is the LAN's IPv4 subnet.
func (l *Lab) LANPrefix() netip.Prefix { return l.plan.lan4() }

// LANPrefix6 is the LAN's IPv6 subnet, or the zero Prefix without Options.IPv6.
func (l *Lab) LANPrefix6() netip.Prefix {
	if !l.opts.IPv6 {
		return netip.Prefix{}
	}
	return l.plan.lan6()
}

func linkUp(h *netlink.Handle, name string) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}

// addAddr adds an address; IPv6 ones skip duplicate address detection, which would otherwise
// keep them unusable for a second or two.
func addAddr(h *netlink.Handle, link netlink.Link, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(link, a); err != nil {
		return fmt.Errorf("adding address %s to %s: %w", p, link.Attrs().Name, err)
	}
	return nil
}

// addRoute adds dst via gw out of link; an invalid gw makes it a directly connected route.
func addRoute(h *netlink.Handle, link netlink.Link, dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst)}
	if gw.IsValid() {
		r.Gw = net.IP(gw.AsSlice())
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("adding route %s via %v dev %s: %w", dst, gw, link.Attrs().Name, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
