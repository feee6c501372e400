package router

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// outsideSubnet is the lab slot's /24 (and /64) that AddOutside uses: netlab keeps the 13th to
// 15th /24 of a slot for networks behind the router.
const outsideSubnet = 13

// Outside is a client namespace behind the router: it reaches the rest of the lab only
// through the router. Use its Host's Request, Do, DialTCP and Exec; it is no lab host, so
// Host.Start is not available.
type Outside struct {
	netlab.Host
	// Prefix4 and Prefix6 are the link between the router (.1, ::1) and the client (.2, ::2);
	// Prefix6 is the zero Prefix in an IPv4-only lab.
	Prefix4, Prefix6 netip.Prefix
	// Gateway4 and Gateway6 are the router's addresses on that link.
	Gateway4, Gateway6 netip.Addr

	router *netlab.Host
}

// AddOutside creates the namespace "<lab id>-outside" joined to router by a veth (router end
// "outside", client end eth0) on the lab slot's 13th /24 and /64, and routes dsts from it via
// the router, and turns forwarding on in the router (a netlab client, used as router, has it
// off). The lab removes the namespace, and the veth with it, when it closes.
func AddOutside(ctx context.Context, lab *netlab.Lab, router *netlab.Host, dsts ...netip.Prefix) (*Outside, error) {
	ns := lab.ID() + "-outside"
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("adding namespace %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	o := &Outside{Host: netlab.Host{Name: "outside", NS: ns}, router: router}
	a4 := lab.LANPrefix().Addr().As4()
	a4[2] += outsideSubnet
	o.Prefix4 = netip.PrefixFrom(netip.AddrFrom4(a4), 24)
	o.Gateway4, o.Addr = o.Prefix4.Addr().Next(), o.Prefix4.Addr().Next().Next()
	if lan6 := lab.LANPrefix6(); lan6.IsValid() {
		a6 := lan6.Addr().As16()
		a6[7] = outsideSubnet
		o.Prefix6 = netip.PrefixFrom(netip.AddrFrom16(a6), 64)
		o.Gateway6, o.Addr6 = o.Prefix6.Addr().Next(), o.Prefix6.Addr().Next().Next()
	}
	type cmd struct {
		h    *netlab.Host
		args []string
	}
	cmds := []cmd{
		// The router forwards (a netlab client does not by default) and sends no redirects.
		{router, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv6.conf.all.forwarding=1"}},
		{router, []string{"ip", "link", "add", "outside", "type", "veth", "peer", "name", "eth0", "netns", ns}},
		{router, []string{"ip", "addr", "add", netip.PrefixFrom(o.Gateway4, 24).String(), "dev", "outside"}},
		{router, []string{"ip", "link", "set", "outside", "up"}},
		{&o.Host, []string{"ip", "link", "set", "lo", "up"}},
		{&o.Host, []string{"ip", "addr", "add", netip.PrefixFrom(o.Addr, 24).String(), "dev", "eth0"}},
		{&o.Host, []string{"ip", "link", "set", "eth0", "up"}},
	}
	if o.Prefix6.IsValid() {
		cmds = append(cmds,
			cmd{router, []string{"ip", "addr", "add", netip.PrefixFrom(o.Gateway6, 64).String(), "dev", "outside", "nodad"}},
			cmd{&o.Host, []string{"ip", "addr", "add", netip.PrefixFrom(o.Addr6, 64).String(), "dev", "eth0", "nodad"}})
	}
	for _, c := range cmds {
		if _, err := c.h.Exec(ctx, c.args[0], c.args[1:]...); err != nil {
			return nil, err
		}
	}
	for _, d := range dsts {
		if err := o.Route(ctx, d); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Route routes dst from the outside client via the router.
func (o *Outside) Route(ctx context.Context, dst netip.Prefix) error {
	gw := o.Gateway4
	if dst.Addr().Is6() {
		gw = o.Gateway6
	}
	if !gw.IsValid() {
		return fmt.Errorf("routing %s from %s: the lab has no IPv6", dst, o.NS)
	}
	_, err := o.Exec(ctx, "ip", "route", "add", dst.String(), "via", gw.String())
	return err
}

// RouteBack routes the outside link from each of hosts (LAN hosts: nodes) via the router's LAN
// address, so that replies to the outside client go back through the router.
func (o *Outside) RouteBack(ctx context.Context, hosts ...*netlab.Host) error {
	for _, h := range hosts {
		if _, err := h.Exec(ctx, "ip", "route", "add", o.Prefix4.String(), "via", o.router.Addr.String()); err != nil {
			return err
		}
		if o.Prefix6.IsValid() && o.router.Addr6.IsValid() {
			if _, err := h.Exec(ctx, "ip", "route", "add", o.Prefix6.String(), "via", o.router.Addr6.String()); err != nil {
				return err
			}
		}
	}
	return nil
}
