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

	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

// TestPerPeerExport: one node peers with two bird sessions (two bird protocols, each between
// its own pair of addresses: bird serialises sessions to one neighbour address); a prefix that lists one peer reaches only that protocol, one without Peers
// reaches both. Moving a prefix to the other peer withdraws it from the first and announces it
// to the second without resetting either session, and a peer removed and added back gets
// exactly its prefixes again.
func TestPerPeerExport(t *testing.T) {
	rl := newRouterLab(t, 1)
	node := rl.nodes[0]
	// Second addresses of the router and the node (netlab leaves .2 to .9 free).
	lan := rl.lab.LANPrefix()
	second, nodeSecond := hostAddr(lan, 2), hostAddr(lan, 3)
	rl.exec(rl.router, "ip", "addr", "add", netip.PrefixFrom(second, lan.Bits()).String(), "dev", "eth0")
	rl.exec(&node.Host, "ip", "addr", "add", netip.PrefixFrom(nodeSecond, lan.Bits()).String(), "dev", "eth0")
	rl.startBird([]router.Neighbor{
		{Name: "peerA", Addr: node.Addr, Local: rl.router.Addr},
		{Name: "peerB", Addr: nodeSecond, Local: second},
	})
	peerA := rl.peers4and6("", false)[0]
	peerB := peerA
	peerB.Address, peerB.SourceAddress = second, nodeSecond

	onlyA := netip.MustParsePrefix("198.18.200.11/32")
	onlyB := netip.MustParsePrefix("198.18.200.12/32")
	both := netip.MustParsePrefix("198.18.200.13/32")
	s := rl.startSpeaker(node)
	s.setPeers(peerA, peerB)
	s.advertise(
		bgp.Advertisement{Prefix: onlyA, Peers: []netip.Addr{peerA.Address}},
		bgp.Advertisement{Prefix: onlyB, Peers: []netip.Addr{peerB.Address}},
		bgp.Advertisement{Prefix: both},
	)
	s.waitEstablished(30 * time.Second)
	rl.waitProtos(onlyA, []string{"peerA"}, 10*time.Second)
	rl.waitProtos(onlyB, []string{"peerB"}, 10*time.Second)
	rl.waitProtos(both, []string{"peerA", "peerB"}, 10*time.Second)
	checkAdvertised(t, s.status(), map[netip.Addr]int{peerA.Address: 2, peerB.Address: 2})

	t.Run("move a prefix to the other peer", func(t *testing.T) {
		since := rl.protoSince(t, "peerA", "peerB")
		s.advertise(
			bgp.Advertisement{Prefix: onlyA, Peers: []netip.Addr{peerB.Address}},
			bgp.Advertisement{Prefix: onlyB, Peers: []netip.Addr{peerB.Address}},
			bgp.Advertisement{Prefix: both, Peers: []netip.Addr{peerA.Address, peerB.Address}},
		)
		rl.waitProtos(onlyA, []string{"peerB"}, 5*time.Second)
		rl.waitProtos(onlyB, []string{"peerB"}, 5*time.Second)
		rl.waitProtos(both, []string{"peerA", "peerB"}, 5*time.Second)
		checkAdvertised(t, s.status(), map[netip.Addr]int{peerA.Address: 1, peerB.Address: 3})
		if after := rl.protoSince(t, "peerA", "peerB"); !sameSince(after, since) {
			t.Errorf("bird's sessions changed state (%v, before %v); a change of peers must not reset them", after, since)
		}
	})

	t.Run("peer removed and added back", func(t *testing.T) {
		s.setPeers(peerA)
		rl.waitProtos(onlyA, nil, 10*time.Second)
		rl.waitProtos(both, []string{"peerA"}, 10*time.Second)
		s.setPeers(peerA, peerB)
		s.waitEstablished(30 * time.Second)
		rl.waitProtos(onlyA, []string{"peerB"}, 10*time.Second)
		rl.waitProtos(onlyB, []string{"peerB"}, 10*time.Second)
		rl.waitProtos(both, []string{"peerA", "peerB"}, 10*time.Second)
	})
}

// TestPasswordRotation: the router and the node change the MD5 password; the session comes
// back with the new one and the route with it.
func TestPasswordRotation(t *testing.T) {
	rl := newRouterLab(t, 1)
	node := rl.nodes[0]
	rl.startBird([]router.Neighbor{{Name: "node1", Addr: node.Addr, Password: "old-password"}})
	s := rl.startSpeaker(node)
	peer := rl.peers4and6("old-password", false)[0]
	s.setPeers(peer)
	s.advertise(bgp.Advertisement{Prefix: vip4})
	rl.waitNextHops(vip4, []netip.Addr{node.Addr}, 30*time.Second)
	before := rl.protoSince(t, "node1")

	time.Sleep(1100 * time.Millisecond) // bird's state-change times have a resolution of 1 s
	rl.reconfigureBird([]router.Neighbor{{Name: "node1", Addr: node.Addr, Password: "new-password"}})
	peer.Password = "new-password"
	s.setPeers(peer)
	waitFor(t, 30*time.Second, "the session to come back with the new password", func() error {
		state, out, err := rl.protoState("node1")
		if err != nil {
			return err
		}
		if state != "Established" {
			return fmt.Errorf("bird: %s", state)
		}
		if since := rl.protoSince(t, "node1"); sameSince(since, before) {
			return fmt.Errorf("bird's session is the one from before the rotation:\n%s", out)
		}
		return nil
	})
	rl.waitNextHops(vip4, []netip.Addr{node.Addr}, 10*time.Second)
}

// waitProtos waits until bird holds routes for prefix from exactly the protocols want.
func (rl *routerLab) waitProtos(prefix netip.Prefix, want []string, timeout time.Duration) {
	rl.t.Helper()
	defer rl.dumpOnFailure()
	want = slices.Sorted(slices.Values(want))
	waitFor(rl.t, timeout, fmt.Sprintf("routes for %s from %v at the router", prefix, want), func() error {
		routes, err := rl.bird.Routes(context.Background(), prefix)
		if err != nil {
			return err
		}
		var got []string
		for _, r := range routes {
			got = append(got, r.Proto)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("from %v", got)
		}
		return nil
	})
}

// protoSince returns, for each bird protocol, its state and the time it entered it (the
// "since" column of `birdc show protocols`).
func (rl *routerLab) protoSince(t *testing.T, names ...string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		text, err := rl.birdc("show", "protocols", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) >= 5 && f[0] == name {
				out = append(out, strings.Join(f[3:5], " ")+" "+strings.Join(f[5:], " "))
			}
		}
	}
	if len(out) != len(names) {
		t.Fatalf("no state line for every protocol of %v: %v", names, out)
	}
	return out
}

// sameSince tells whether two protoSince readings show the same sessions (router.SameSince for
// each protocol).
func sameSince(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !router.SameSince(a[i], b[i]) {
			return false
		}
	}
	return true
}

func checkAdvertised(t *testing.T, st bgp.Status, want map[netip.Addr]int) {
	t.Helper()
	for _, p := range st.Peers {
		if n, ok := want[p.Address]; ok && p.Advertised != n {
			t.Errorf("peer %s: %d prefixes advertised, want %d", p.Address, p.Advertised, n)
		}
	}
}
