//go:build e2e

package bgp_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/traffic"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

// grRestartTime is the graceful restart time the speakers offer in these tests.
const grRestartTime = 30 * time.Second

// grGap is how long the tests leave a node without a speaker after the router has seen the
// old one go: longer than BFD's detection time (300 ms), shorter than an agent pod's
// replacement usually takes.
const grGap = 2 * time.Second

// TestGracefulRestart stops a speaker for a restart (StopForRestart, SIGUSR1 to bgpspeaker: as
// portico-agent stops on a node that stays) and starts a new one after grGap, then crashes one
// (SIGKILL), against bird as a graceful restart helper (its default, "aware"):
//
//   - no BFD: bird keeps the node's route in its table and the router's kernel throughout the
//     restart, held connections through the router survive and new ones never fail; the new
//     speaker's session ends the restart (End-of-RIB). A crash looks the same to bird (the
//     kernel closes the TCP session without a NOTIFICATION): the route stays for the restart
//     time, while the node's rules (left in the kernel) still serve.
//   - BFD: bird ends a graceful restart when the neighbour's BFD session goes down (bird 2.0.12
//     stops the protocol on a BFD down event), so the route goes at BFD's detection time after
//     either stop, as without graceful restart: fast failover wins.
//   - BFD with bird's "bfd graceful": BFD down starts a graceful restart, so the route stays
//     through the restart, and through a crash too (for the restart time).
func TestGracefulRestart(t *testing.T) {
	for _, tc := range []struct {
		name             string
		bfd, bfdGraceful bool
		kept             bool // the route stays over a restart and a crash
	}{
		{"no BFD", false, false, true},
		{"BFD", true, false, false},
		{"BFD graceful", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testGracefulRestart(t, tc.bfd, tc.bfdGraceful, tc.kept) })
	}
}

func testGracefulRestart(t *testing.T, bfd, bfdGraceful, kept bool) {
	rl := newRouterLab(t, 1)
	node := rl.nodes[0]
	rl.startBird([]router.Neighbor{{Name: node.Name, Addr: node.Addr, BFD: bfd, BFDGraceful: bfdGraceful}})
	peer := rl.peers4and6("", bfd)[0]
	peer.GracefulRestart = grRestartTime
	adv := bgp.Advertisement{Prefix: vip4}
	hops := []netip.Addr{node.Addr}

	// start runs a speaker as the agent's Consumer drives it: advertisements, then peers.
	start := func() *speaker {
		s := rl.startSpeaker(node)
		s.advertise(adv)
		s.setPeers(peer)
		return s
	}
	s := start()
	s.waitEstablished(30 * time.Second)
	rl.waitNextHops(vip4, hops, 10*time.Second)
	if state, out, err := rl.protoState(node.Name); err != nil || state != "Established" || !strings.Contains(out, "Restart time: 30") {
		t.Fatalf("bird's session: %q (%v); want Established with the node's graceful restart capability (restart time 30):\n%s", state, err, out)
	}

	load := traffic.Start(t, rl.outside, netip.AddrPortFrom(vip4.Addr(), echoPort), traffic.Options{Held: 2, TolerateFailures: true})
	load.WaitRounds(t, 5, "traffic through the router")

	watch := rl.watchRoute(vip4, hops)
	s.signal(syscall.SIGUSR1)
	stopped := time.Now()
	rl.waitSessionGone(node.Name, bfd)
	t.Logf("stop for a restart: bird saw the session (and BFD) go %s after the stop", time.Since(stopped).Round(time.Millisecond))
	if kept {
		observe(t, watch, grGap)
	} else {
		rl.waitNextHops(vip4, nil, 3*time.Second)
		t.Logf("stop for a restart with BFD: the router dropped the route %s after the stop", time.Since(stopped).Round(time.Millisecond))
	}

	s = start()
	restarted := time.Now()
	s.waitEstablished(30 * time.Second)
	rl.waitRestartDone(node.Name, 10*time.Second)
	rl.waitNextHops(vip4, hops, 10*time.Second)
	t.Logf("new speaker: session established, restart done and route in place %s after its start, %s after the old one stopped",
		time.Since(restarted).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	load.WaitRounds(t, 5, "traffic after the restart")
	_, gaps := watch.Stop()
	res := load.Stop()
	t.Logf("during the restart: %d requests on new connections (%d failed, longest failed window %s), %d on held connections, %d held connections reset; %d route gaps",
		res.NewRequests, res.FailedNew, res.LongestFailure, res.OnHeld, len(res.Resets), len(gaps))
	if kept {
		if len(gaps) > 0 {
			t.Errorf("the route for %s left the router during a graceful restart: %v", vip4, gaps)
		}
		if res.FailedNew > 0 || len(res.Resets) > 0 {
			t.Errorf("traffic broke during a graceful restart: %d new connections failed (%v), held connections reset: %v", res.FailedNew, res.Failed, res.Resets)
		}
	}

	// A crash.
	s.signal(syscall.SIGKILL)
	killed := time.Now()
	if !kept {
		rl.waitNextHops(vip4, nil, 3*time.Second)
		t.Logf("crash with BFD: the router dropped the route %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
		return
	}
	watch = rl.watchRoute(vip4, hops)
	rl.waitSessionGone(node.Name, bfd)
	observe(t, watch, grGap)
	if _, gaps := watch.Stop(); len(gaps) > 0 {
		t.Errorf("crash: the route left the router during the restart time: %v", gaps)
	}
	t.Logf("crash: the router still holds the route %s after SIGKILL (until the restart time, %s, or a new speaker)",
		time.Since(killed).Round(time.Millisecond), grRestartTime)
}

// signal sends sig to the speaker and waits for its process to end.
func (s *speaker) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := syscall.Kill(s.proc.Pid(), sig); err != nil {
		s.t.Fatal(err)
	}
	<-s.proc.Done()
}

// waitSessionGone waits until bird no longer has an established session with name (and, with
// bfd, until its BFD session to the node has left Up too: the time at which a BFD-driven
// router acts).
func (rl *routerLab) waitSessionGone(name string, bfd bool) {
	rl.t.Helper()
	waitFor(rl.t, 5*time.Second, "bird to see the session "+name+" end", func() error {
		state, _, err := rl.protoState(name)
		if err != nil {
			return err
		}
		if state == "Established" {
			return fmt.Errorf("session %s", state)
		}
		if !bfd {
			return nil
		}
		sessions, err := rl.bird.BFDSessions(context.Background())
		if err != nil {
			return err
		}
		for addr, st := range sessions {
			if st == "Up" {
				return fmt.Errorf("BFD session with %s Up", addr)
			}
		}
		return nil
	})
}

// waitRestartDone waits until bird's session with name is established and its channel has left
// graceful restart (bird shows "GR state" while it keeps stale routes of a restarting peer).
func (rl *routerLab) waitRestartDone(name string, timeout time.Duration) {
	rl.t.Helper()
	waitFor(rl.t, timeout, "bird to end the graceful restart of "+name, func() error {
		state, out, err := rl.protoState(name)
		if err != nil {
			return err
		}
		if state != "Established" {
			return fmt.Errorf("session %s", state)
		}
		if router.GracefulRestartActive(out) {
			return fmt.Errorf("graceful restart still active:\n%s", out)
		}
		return nil
	})
}

// watchRoute watches the router's next hops for prefix (bird and kernel) every 20 ms.
func (rl *routerLab) watchRoute(prefix netip.Prefix, want []netip.Addr) *router.RouteWatch {
	return router.WatchNextHops(rl.bird, prefix, want, 20*time.Millisecond)
}

// observe keeps watching for d (the window the caller asserts about) and fails t at once on a
// gap; it needs the watch to have polled at least every 200 ms on average (so a starved
// poller fails rather than passes).
func observe(t *testing.T, w *router.RouteWatch, d time.Duration) {
	t.Helper()
	before, _ := w.Seen()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, gaps := w.Seen(); len(gaps) > 0 {
			t.Fatalf("the route left the router: %v", gaps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	polls, _ := w.Seen()
	if want := int(d / (200 * time.Millisecond)); polls-before < want {
		t.Fatalf("the route watch polled %d times in %s; want at least %d (starved?)", polls-before, d, want)
	}
}
