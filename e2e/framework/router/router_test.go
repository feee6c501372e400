package router

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/internal/prereq"
)

// TestRouterLab runs bird in a lab's router namespace and the client behind it: bird answers
// birdc, tries its session to a node that runs no BGP speaker, takes a new configuration in
// place, and the outside client reaches a node's echo server over IPv4 and IPv6 only through
// the router (and the node answers back the same way).
func TestRouterLab(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.Bird2)
	lab := netlab.New(t, netlab.Options{Nodes: 1, Router: true, IPv6: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := lab.Nodes()[0]
	c := Config{ASN: 64512, Neighbors: []Neighbor{{Name: "node1", Addr: node.Addr, ASN: 64513, BFD: true}}}
	b, err := Start(ctx, lab.Router(), t.TempDir(), c)
	if err != nil {
		t.Fatal(err)
	}
	state, err := b.ProtocolState(ctx, "node1")
	if err != nil || state == "Established" {
		t.Errorf("session to a node without a speaker: %q, %v", state, err)
	}
	hops, err := b.NextHops(ctx, netip.MustParsePrefix("198.18.200.1/32"))
	if err != nil || len(hops) != 0 {
		t.Errorf("next hops of an unknown prefix: %v, %v", hops, err)
	}

	c.Neighbors = append(c.Neighbors, Neighbor{Name: "node1_6", Addr: node.Addr6, ASN: 64513, Password: "pw"})
	if err := b.Reconfigure(ctx, c); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Birdc(ctx, "show", "protocols"); err != nil || !strings.Contains(out, "node1_6") {
		t.Errorf("after Reconfigure bird lacks protocol node1_6: %v\n%s", err, out)
	}
	if got := b.Config(); len(got.Neighbors) != 2 {
		t.Errorf("Config() after Reconfigure: %+v", got)
	}
	if err := b.Reconfigure(ctx, Config{ASN: 64512, HoldTime: time.Second}); err == nil {
		t.Error("Reconfigure took a hold time of 1 s")
	}

	o, err := AddOutside(ctx, lab, lab.Router(), lab.LANPrefix(), lab.LANPrefix6())
	if err != nil {
		t.Fatal(err)
	}
	if err := o.RouteBack(ctx, &node.Host); err != nil {
		t.Fatal(err)
	}
	if lan := lab.LANPrefix(); lan.Contains(o.Addr) || !o.Prefix4.Contains(o.Addr) || !o.Prefix6.Contains(o.Addr6) {
		t.Errorf("outside client %s %s on %s %s, LAN %s", o.Addr, o.Addr6, o.Prefix4, o.Prefix6, lan)
	}
	node.StartEchoServer(t, "tcp", 8080)
	for _, a := range []netip.Addr{node.Addr, node.Addr6} {
		r, err := o.Request(ctx, "tcp", netip.AddrPortFrom(a, 8080))
		if err != nil {
			t.Fatalf("outside client to %s: %v", a, err)
		}
		want := o.Addr
		if a.Is6() {
			want = o.Addr6
		}
		if r.Client.Addr() != want {
			t.Errorf("node saw %s, want the outside client's %s", r.Client, want)
		}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}
