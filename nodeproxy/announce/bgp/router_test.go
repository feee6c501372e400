//go:build e2e

package bgp_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

// TestRouter runs three nodes' speakers against bird2 with MD5 and BFD on every session, over
// IPv4 and IPv6: the router learns each VIP with every node as next hop, a client behind the
// router is served through them, a withdrawn advertisement removes its next hop, and a graceful
// stop has withdrawn the node's routes by the time the speaker exits.
func TestRouter(t *testing.T) {
	rl := newRouterLab(t, 3)
	const password = "portico-md5"
	var neighbors []router.Neighbor
	for _, n := range rl.nodes {
		neighbors = append(neighbors,
			router.Neighbor{Name: n.Name, Addr: n.Addr, Password: password, BFD: true},
			router.Neighbor{Name: n.Name + "v6", Addr: n.Addr6, Password: password, BFD: true})
	}
	rl.startBird(neighbors)

	communities := []uint32{mustCommunity(t, "65000:100")}
	large := []bgp.LargeCommunity{{ASN: nodeASN, Data1: 1, Data2: 2}}
	advs := []bgp.Advertisement{
		{Prefix: vip4, Communities: communities, LargeCommunities: large, LocalPref: 200},
		{Prefix: vip6, Communities: communities, LargeCommunities: large},
	}
	var speakers []*speaker
	var hops4, hops6 []netip.Addr
	for _, n := range rl.nodes {
		s := rl.startSpeaker(n)
		s.setPeers(rl.peers4and6(password, true)...)
		s.advertise(advs...)
		speakers = append(speakers, s)
		hops4, hops6 = append(hops4, n.Addr), append(hops6, n.Addr6)
	}
	for _, s := range speakers {
		s.waitEstablished(30 * time.Second)
	}
	rl.waitNextHops(vip4, hops4, 10*time.Second)
	rl.waitNextHops(vip6, hops6, 10*time.Second)

	t.Run("attributes", func(t *testing.T) {
		routes, err := rl.bird.Routes(context.Background(), vip4)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != 3 {
			t.Fatalf("%d routes for %s, want 3", len(routes), vip4)
		}
		for _, r := range routes {
			if got := r.Attrs["BGP.community"]; got != "(65000,100)" {
				t.Errorf("route from %s: community %q, want (65000,100)", r.Proto, got)
			}
			if got, want := r.Attrs["BGP.large_community"], fmt.Sprintf("(%d, 1, 2)", nodeASN); got != want {
				t.Errorf("route from %s: large community %q, want %q", r.Proto, got, want)
			}
			if got := r.Attrs["BGP.as_path"]; got != fmt.Sprint(nodeASN) {
				t.Errorf("route from %s: AS path %q, want %d", r.Proto, got, nodeASN)
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		st := speakers[0].status()
		if st.Advertisements != 2 || len(st.Peers) != 2 {
			t.Fatalf("status %+v: want 2 advertisements and 2 peers", st)
		}
		for _, p := range st.Peers {
			if p.State != bgp.SessionEstablished || p.BFD != bgp.BFDUp || p.Advertised != 1 || p.Message != "" {
				t.Errorf("peer %+v: want Established, BFD Up, 1 advertised, no message", p)
			}
		}
		m := speakers[0].metrics()
		for _, want := range []string{
			fmt.Sprintf(`portico_agent_bgp_session_state{peer="%s",state="Established"} 1`, rl.router.Addr),
			fmt.Sprintf(`portico_agent_bgp_bfd_state{peer="%s",state="Up"} 1`, rl.router.Addr6),
			fmt.Sprintf(`portico_agent_bgp_advertised_prefixes{peer="%s"} 1`, rl.router.Addr),
			"portico_agent_bgp_announced_prefixes 2",
			"portico_agent_bgp_withdrawals_total 0",
			"portico_agent_bgp_peer_recreations_total 0",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q:\n%s", want, m)
			}
		}
	})

	t.Run("client behind the router", func(t *testing.T) {
		for _, vip := range []netip.Prefix{vip4, vip6} {
			served := servedBy(t, rl.outside, vip.Addr(), 30)
			t.Logf("%s from behind the router: served by %v", vip.Addr(), served)
			if len(served) < 2 {
				t.Errorf("%s: 30 connections served by %v; want ECMP over at least 2 of 3 nodes", vip.Addr(), served)
			}
		}
	})

	t.Run("withdraw", func(t *testing.T) {
		speakers[1].advertise() // node2 no longer eligible
		rl.waitNextHops(vip4, []netip.Addr{rl.nodes[0].Addr, rl.nodes[2].Addr}, 5*time.Second)
		rl.waitNextHops(vip6, []netip.Addr{rl.nodes[0].Addr6, rl.nodes[2].Addr6}, 5*time.Second)
		if m := speakers[1].metrics(); !strings.Contains(m, "portico_agent_bgp_withdrawals_total 2") {
			t.Errorf("metrics after withdrawing 2 prefixes:\n%s", m)
		}
		served := servedBy(t, rl.outside, vip4.Addr(), 20)
		if served[rl.nodes[1].Name] > 0 {
			t.Errorf("withdrawn node2 still served: %v", served)
		}
		speakers[1].advertise(advs...)
		rl.waitNextHops(vip4, hops4, 5*time.Second)
	})

	t.Run("graceful stop", func(t *testing.T) {
		start := time.Now()
		speakers[2].stop()
		took := time.Since(start)
		// No waiting: the routes must be gone when the speaker has exited.
		for _, c := range []struct {
			vip  netip.Prefix
			want []netip.Addr
		}{{vip4, hops4[:2]}, {vip6, hops6[:2]}} {
			got, err := rl.bird.NextHops(context.Background(), c.vip)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, slices.SortedFunc(slices.Values(c.want), netip.Addr.Compare)) { // NextHops sorts
				t.Errorf("%s right after node3's speaker exited: next hops %v, want %v", c.vip, got, c.want)
			}
		}
		state, out, err := rl.protoState(rl.nodes[2].Name)
		if err != nil {
			t.Fatal(err)
		}
		if state == "Established" || !strings.Contains(out, "Peer de-configured") {
			t.Errorf("bird's session to node3 after a graceful stop: want closed by a Cease (peer de-configured):\n%s", out)
		}
		t.Logf("graceful stop took %s (withdraw, wait for the UPDATE to be sent, Cease)", took.Round(time.Millisecond))
	})
}

// TestWrongPassword: a session whose MD5 password does not match never comes up, the speaker's
// status says why in words, and the router shows no session either; the same node's session
// with the right password is fine.
func TestWrongPassword(t *testing.T) {
	rl := newRouterLab(t, 1)
	node := rl.nodes[0]
	rl.startBird([]router.Neighbor{
		{Name: "node1", Addr: node.Addr, Password: "right"},
		{Name: "node1v6", Addr: node.Addr6, Password: "right"},
	})
	s := rl.startSpeaker(node)
	peers := rl.peers4and6("right", false)
	peers[0].Password = "wrong" // IPv4 session
	s.setPeers(peers...)
	s.advertise(bgp.Advertisement{Prefix: vip4}, bgp.Advertisement{Prefix: vip6})
	rl.waitNextHops(vip6, []netip.Addr{node.Addr6}, 20*time.Second)

	// The right-password session is up; wait until the wrong one's connect attempts were
	// refused and the status says why.
	var p4 bgp.PeerStatus
	waitFor(t, 20*time.Second, "the wrong-password peer's status to name the MD5 password", func() error {
		p4 = bgp.PeerStatus{}
		for _, p := range s.status().Peers {
			if p.Address == rl.router.Addr {
				p4 = p
			}
		}
		if p4.State == bgp.SessionEstablished {
			return fmt.Errorf("established with a wrong password: %+v", p4)
		}
		if !strings.Contains(p4.Message, "MD5 password") {
			return fmt.Errorf("status %+v", p4)
		}
		return nil
	})
	t.Logf("wrong-password peer: %s: %s", p4.State, p4.Message)
	if state, out, _ := rl.protoState("node1"); state == "Established" {
		t.Errorf("bird established a session with a wrong password:\n%s", out)
	}
	if hops, err := rl.bird.NextHops(context.Background(), vip4); err != nil || len(hops) != 0 {
		t.Errorf("router has %s via %v (err %v); want no route", vip4, hops, err)
	}
}

// TestLinkCut cuts a node's link and measures how long the router keeps its next hop: with
// BFD (100 ms x 3) and without (hold time 9 s). BenchmarkLinkCut repeats it.
func TestLinkCut(t *testing.T) {
	rl, speakers := newLinkCutLab(t)
	withBFD := rl.cutAndMeasure(speakers[0], true, 3*time.Second)
	t.Logf("link cut, BFD 100ms x 3: router dropped the next hop after %s", withBFD.Round(time.Millisecond))
	if withBFD > time.Second {
		t.Errorf("with BFD the next hop stayed %s after the cut; want under 1 s", withBFD)
	}
	without := rl.cutAndMeasure(speakers[1], false, 2*holdTime)
	t.Logf("link cut, no BFD, hold time %s: router dropped the next hop after %s", holdTime, without.Round(time.Millisecond))
	if without < holdTime/3 {
		t.Errorf("without BFD the next hop went after %s; want about the hold time (%s): was it BFD?", without, holdTime)
	}
}

// BenchmarkLinkCut measures next-hop removal after a link cut, PORTICO_BGP_TRIALS (default
// 10) times with BFD and without:
//
//	go test -tags e2e -run '^$' -bench LinkCut -benchtime 1x ./nodeproxy/announce/bgp/
func BenchmarkLinkCut(b *testing.B) {
	trials := envInt(b, "PORTICO_BGP_TRIALS", 10)
	rl, speakers := newLinkCutLab(b)
	for _, c := range []struct {
		name    string
		sp      *speaker
		bfd     bool
		timeout time.Duration
	}{{"bfd", speakers[0], true, 3 * time.Second}, {"hold", speakers[1], false, 2 * holdTime}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var ds []time.Duration
				for range trials {
					ds = append(ds, rl.cutAndMeasure(c.sp, c.bfd, c.timeout))
				}
				slices.Sort(ds)
				b.ReportMetric(ds[len(ds)/2].Seconds()*1000, "median-ms")
				b.ReportMetric(ds[len(ds)-1].Seconds()*1000, "worst-ms")
				b.Logf("%s: %d trials: median %s, worst %s, all %v", c.name, trials, ds[len(ds)/2], ds[len(ds)-1], ds)
			}
		})
	}
}

// newLinkCutLab: node1 peers with BFD, node2 without; both advertise vip4.
func newLinkCutLab(t testing.TB) (*routerLab, []*speaker) {
	rl := newRouterLab(t, 2)
	rl.startBird([]router.Neighbor{
		{Name: "node1", Addr: rl.nodes[0].Addr, BFD: true},
		{Name: "node2", Addr: rl.nodes[1].Addr},
	})
	var speakers []*speaker
	for i, n := range rl.nodes {
		s := rl.startSpeaker(n)
		p := rl.peers4and6("", i == 0)[0]
		s.setPeers(p)
		s.advertise(bgp.Advertisement{Prefix: vip4})
		speakers = append(speakers, s)
	}
	return rl, speakers
}

// cutAndMeasure waits until the router has both next hops in its kernel and, with bfd, bird's
// BFD session to s's node is Up, both seen in one look right before the cut (BGP comes up
// before BFD, and on a loaded machine a BFD session that expires while coming up resets BGP: a
// cut then would measure that reset or the hold timer, not BFD); then it cuts s's node's link,
// measures how long until the router drops that node's next hop, and plugs the link back.
func (rl *routerLab) cutAndMeasure(s *speaker, bfd bool, timeout time.Duration) time.Duration {
	rl.t.Helper()
	all := []netip.Addr{rl.nodes[0].Addr, rl.nodes[1].Addr}
	s.waitEstablished(30 * time.Second)
	rl.waitNextHops(vip4, all, 30*time.Second)
	rl.waitCutReady(s.node.Addr, all, bfd, 30*time.Second)
	rl.setLink(s.node, false)
	start := time.Now()
	defer rl.setLink(s.node, true)
	for {
		// The router's kernel route, which traffic meets (bird's table leads it a little).
		hops, err := router.KernelNextHops(rl.router, vip4)
		if err != nil {
			rl.t.Fatal(err)
		}
		if !slices.Contains(hops, s.node.Addr) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			rl.t.Fatalf("router kept next hop %s for %s after the link cut", s.node.Addr, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCutReady waits until, in one look, the router's kernel route to vip4 has the next hops
// all and, with bfd, bird's BFD session to addr is Up.
func (rl *routerLab) waitCutReady(addr netip.Addr, all []netip.Addr, bfd bool, timeout time.Duration) {
	rl.t.Helper()
	defer rl.dumpOnFailure()
	all = slices.Clone(all)
	slices.SortFunc(all, netip.Addr.Compare) // KernelNextHops sorts
	wait.For(rl.t, timeout, "router ready for a cut of "+addr.String(), func() error {
		hops, err := router.KernelNextHops(rl.router, vip4)
		if err != nil {
			return err
		}
		if !slices.Equal(hops, all) {
			return fmt.Errorf("kernel next hops %v, want %v", hops, all)
		}
		if !bfd {
			return nil
		}
		s, err := rl.bird.BFDSessions(context.Background())
		if err != nil {
			return err
		}
		if s[addr] != "Up" {
			return fmt.Errorf("bird's BFD session to %s is %q", addr, s[addr])
		}
		return nil
	})
}

// servedBy opens n connections from h to the echo servers behind addr and counts the nodes
// that answered.
func servedBy(t *testing.T, h *netlab.Host, addr netip.Addr, n int) map[string]int {
	t.Helper()
	served := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := h.Request(ctx, "tcp", netip.AddrPortFrom(addr, echoPort))
		cancel()
		if err != nil {
			t.Fatalf("client behind the router: %v", err)
		}
		served[r.Server]++
	}
	return served
}

func mustCommunity(t *testing.T, s string) uint32 {
	t.Helper()
	c, err := bgp.ParseCommunity(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
