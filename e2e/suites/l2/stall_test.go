package l2

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// reassertMax bounds how long after a stalled owner runs again the client's neighbour entries
// take to come back to it: the others must count it alive again, the node that took its VIPs
// withdraw and ask it to announce again, and one of its announcements arrive after the
// neighbour lock time (1 s) of the taker's last one. Without the ask the entries stay on the
// taker until they expire (15 s or more, and traffic keeps them reachable).
const reassertMax = 4 * time.Second

// TestL2OwnerStall: an announcing agent that stalls (SIGSTOP: a node starved of CPU for a
// moment) is declared dead and the next node takes its VIPs. The owner never saw itself dead
// and keeps counting itself the announcer; once it runs again and the others count it alive,
// the next node withdraws and asks it to announce again, so the client comes back to the owner
// at once, not when its neighbour entries expire (until then it kept sending to the next node,
// and every connection opened meanwhile would be reset when it finally moved back).
func TestL2OwnerStall(t *testing.T) {
	s := newScenario(t, "stall")
	winner, next := s.order[0], s.order[1]
	s.settle(t, winner)
	// The owner's own announcements are over: what brings the client back below is the ask,
	// not the rest of its takeover burst.
	waitMetric(t, winner, "portico_agent_l2_announcement_bursts 0\n", 10*time.Second)
	askedBefore := strings.Count(agentOf(winner).Output(), "Announcing this node's VIPs again")
	owner := agentOf(winner)
	if err := syscall.Kill(owner.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(owner.Pid(), syscall.SIGCONT)
		}
	}()
	t0 := time.Now()
	for _, v := range []netip.Addr{s.v4, s.v6} {
		at, ok := waitNeighbour(s.h, v, next, failoverMax)
		if !ok {
			t.Fatalf("%s: the client's neighbour did not move to %s within %v of the stall (now %s)", v, next, failoverMax, nodeOfMAC(netlab.Neighbour(s.h, v)))
		}
		t.Logf("%s: %s took over %v after the stall", v, next, at.Sub(t0).Round(time.Millisecond))
	}

	if err := syscall.Kill(owner.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	t1 := time.Now()
	for _, v := range []netip.Addr{s.v4, s.v6} {
		at, ok := waitNeighbour(s.h, v, winner, reassertMax)
		if !ok {
			t.Fatalf("%s: the client's neighbour stayed on %s for %v after %s ran again (now %s)", v, nodeOfMAC(netlab.Neighbour(s.h, v)), reassertMax, winner, nodeOfMAC(netlab.Neighbour(s.h, v)))
		}
		t.Logf("%s: back on %s %v after it ran again", v, winner, at.Sub(t1).Round(time.Millisecond))
	}
	if !logged(agentOf(next).Output(), `"Withdrawing VIP"`, `next="`+winner+`"`) {
		t.Errorf("%s did not log withdrawing the VIPs to %s", next, winner)
	}
	if n := strings.Count(agentOf(winner).Output(), "Announcing this node's VIPs again"); n <= askedBefore {
		t.Errorf("%s was not asked to announce again", winner)
	}
	s.settle(t, winner)
}
