package conformance

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/router"
)

// TesterAddr is the test process's source address: outside the nodes' /16 (198.19.0.0/16),
// which the source-IP specs count as masqueraded, and outside the Service CIDR
// (198.18.0.0/17) and Pool. It lives only in the lab's namespaces.
var TesterAddr = netip.MustParseAddr("198.18.253.1")

// Pool is the address pool the LoadBalancer specs' Services get their ingress IPs from; in a
// dual-stack cluster Pool6 too (inside cluster.LBPoolCIDR6, outside every lab slot).
var (
	Pool  = netip.MustParsePrefix("198.18.200.0/24")
	Pool6 = netip.MustParsePrefix("fd00:c613:ff01::c800/120")
)

// Tester is the network namespace e2e.test runs in: a client behind the lab's router
// (router.AddOutside) whose packets carry TesterAddr. The router forwards them to the nodes'
// LAN, to the pods and to Pool, and masquerades only the connections to the apiserver
// (the root namespace has no route to TesterAddr, and must get none); the nodes route
// TesterAddr back via the router. In a dual-stack cluster the same holds for IPv6 with Addr6:
// the outside link's own address, in a /64 of its own (the source-IP specs count the nodes'
// /64 as masqueraded), routed to the lab's /48 and Pool6.
type Tester struct {
	*router.Outside
	// Addr6 is the tester's IPv6 source address in a dual-stack cluster, else the zero Addr.
	Addr6 netip.Addr
}

// PoolRouting is how the router reaches Pool.
type PoolRouting int

const (
	// OnLink: Pool is on the LAN; the router asks by ARP who has a VIP (L2 announcement).
	OnLink PoolRouting = iota
	// ViaEveryNode: Pool is routed by ECMP via every node, as a router with static routes and
	// no health checks would (for kube-proxy, which announces nothing).
	ViaEveryNode
	// ViaBGP: the router's bird2 (StartRouterBGP) installs each VIP's route with every node
	// that announces it as a next hop; the kernel spreads flows over them by ECMP.
	ViaBGP
)

// NewTester adds the tester namespace to c's lab (which needs its router: nodes.Options.Router).
func NewTester(ctx context.Context, c *nodes.Cluster, pool PoolRouting) (*Tester, error) {
	rt := c.Lab.Router()
	if rt == nil {
		return nil, fmt.Errorf("the tester needs the lab's router (nodes.Options.Router)")
	}
	o, err := router.AddOutside(ctx, c.Lab, rt)
	if err != nil {
		return nil, fmt.Errorf("adding the tester namespace: %w", err)
	}
	block := netip.PrefixFrom(c.Lab.LANPrefix().Addr(), 20) // the LAN and every pod CIDR
	src := TesterAddr.String()
	type cmd struct {
		run  func(context.Context, string, ...string) ([]byte, error)
		args []string
	}
	cmds := []cmd{
		{o.Exec, []string{"ip", "addr", "add", src + "/32", "dev", "eth0"}},
		{o.Exec, []string{"ip", "route", "add", block.String(), "via", o.Gateway4.String(), "src", src}},
		{o.Exec, []string{"ip", "route", "add", Pool.String(), "via", o.Gateway4.String(), "src", src}},
		{rt.Exec, []string{"ip", "route", "add", src + "/32", "via", o.Addr.String(), "dev", "outside"}},
		{rt.Exec, []string{"iptables", "-t", "nat", "-A", "POSTROUTING", "-s", src, "-d", c.Lab.RootAddr().String(), "-j", "MASQUERADE"}},
	}
	switch pool {
	case OnLink:
		cmds = append(cmds, cmd{rt.Exec, []string{"ip", "route", "add", Pool.String(), "dev", "eth0"}})
	case ViaEveryNode:
		args := []string{"ip", "route", "add", Pool.String()}
		for _, n := range c.Nodes {
			args = append(args, "nexthop", "via", n.Lab.Addr.String())
		}
		// Spread the tester's flows by ports too: it is one source address.
		cmds = append(cmds, cmd{rt.Exec, []string{"sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1"}}, cmd{rt.Exec, args})
	case ViaBGP:
		// bird adds the routes; StartRouterBGP has the kernel hash by ports too.
	}
	for _, n := range c.Nodes {
		cmds = append(cmds, cmd{n.Lab.Exec, []string{"ip", "route", "add", src + "/32", "via", rt.Addr.String()}})
	}
	t := &Tester{Outside: o}
	if c.DualStack() {
		t.Addr6 = o.Addr6
		gw6 := o.Gateway6.String()
		block6 := netip.PrefixFrom(c.Lab.LANPrefix6().Addr(), 48) // the slot: the LAN and every pod CIDR
		cmds = append(cmds,
			cmd{o.Exec, []string{"ip", "-6", "route", "add", block6.String(), "via", gw6}},
			cmd{o.Exec, []string{"ip", "-6", "route", "add", Pool6.String(), "via", gw6}},
			cmd{rt.Exec, []string{"ip6tables", "-t", "nat", "-A", "POSTROUTING", "-s", o.Addr6.String(), "-d", c.Lab.RootAddr6().String(), "-j", "MASQUERADE"}},
		)
		switch pool {
		case OnLink:
			cmds = append(cmds, cmd{rt.Exec, []string{"ip", "-6", "route", "add", Pool6.String(), "dev", "eth0"}})
		case ViaEveryNode:
			args := []string{"ip", "-6", "route", "add", Pool6.String()}
			for _, n := range c.Nodes {
				args = append(args, "nexthop", "via", n.Lab.Addr6.String())
			}
			cmds = append(cmds, cmd{rt.Exec, []string{"sysctl", "-qw", "net.ipv6.fib_multipath_hash_policy=1"}}, cmd{rt.Exec, args})
		case ViaBGP:
			// bird's IPv6 sessions add the IPv6 VIPs' routes.
		}
		for _, n := range c.Nodes {
			cmds = append(cmds, cmd{n.Lab.Exec, []string{"ip", "-6", "route", "add", o.Prefix6.String(), "via", rt.Addr6.String()}})
		}
	}
	for _, c := range cmds {
		if out, err := c.run(ctx, c.args[0], c.args[1:]...); err != nil {
			return nil, fmt.Errorf("setting up the tester: %w: %s", err, out)
		}
	}
	return t, nil
}
