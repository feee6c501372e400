package l2

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// heldConn is one TCP connection from the client to a VIP kept busy: a line written and its
// echo read every 50 ms until stop, or until a request fails.
type heldConn struct {
	served atomic.Int64
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

func holdConn(tb testing.TB, dst netip.AddrPort) *heldConn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := shared.Lab.Clients()[0].DialTCP(ctx, dst)
	if err != nil {
		tb.Fatalf("opening a held connection to %s: %v", dst, err)
	}
	h := &heldConn{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer conn.Close()
		if err := h.run(conn); err != nil {
			h.mu.Lock()
			h.err = err
			h.mu.Unlock()
		}
	}()
	tb.Cleanup(h.close)
	return h
}

func (h *heldConn) run(conn net.Conn) error {
	rd := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rd.ReadString('\n'); err != nil {
		return fmt.Errorf("reading the greeting: %w", err)
	}
	tk := time.NewTicker(probeEvery)
	defer tk.Stop()
	for seq := 0; ; seq++ {
		line := fmt.Sprintf("request %d\n", seq)
		// A restart must not stall the connection: 5 s is far more than it takes.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte(line)); err != nil {
			return fmt.Errorf("request %d: write: %w", seq, err)
		}
		got, err := rd.ReadString('\n')
		if err != nil || got != line {
			return fmt.Errorf("request %d: read %q: %v", seq, got, err)
		}
		h.served.Add(1)
		select {
		case <-h.stop:
			return nil
		case <-tk.C:
		}
	}
}

// failure returns the error that ended the connection (nil while it runs).
func (h *heldConn) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// waitServed waits until n more requests than now were served over the connection.
func (h *heldConn) waitServed(tb testing.TB, n int64, within time.Duration) {
	tb.Helper()
	want := h.served.Load() + n
	end := time.Now().Add(within)
	for h.served.Load() < want {
		if err := h.failure(); err != nil {
			tb.Fatalf("the held connection failed: %v", err)
		}
		if time.Now().After(end) {
			tb.Fatalf("the held connection served %d of %d requests within %v", h.served.Load(), want, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *heldConn) close() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// neighbourWatch samples the client's neighbour entries of the VIPs every 10 ms and keeps
// every MAC other than want that it saw.
type neighbourWatch struct {
	stop  chan struct{}
	done  chan struct{}
	other map[string]bool
}

func watchNeighbours(s *scenario, want string) *neighbourWatch {
	w := &neighbourWatch{stop: make(chan struct{}), done: make(chan struct{}), other: map[string]bool{}}
	go func() {
		defer close(w.done)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			for _, v := range []netip.Addr{s.v4, s.v6} {
				if mac := netlab.Neighbour(s.h, v); mac != nil && mac.String() != want {
					w.other[fmt.Sprintf("%s: %s (%s)", v, mac, nodeOfMAC(mac))] = true
				}
			}
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

func (w *neighbourWatch) close() []string {
	close(w.stop)
	<-w.done
	var out []string
	for o := range w.other {
		out = append(out, o)
	}
	return out
}

// TestL2AgentRestart: restarting the announcing agent with SIGTERM (as a DaemonSet rolling
// update does) keeps both VIPs on its node and a held TCP connection alive, with no failed
// new connection; the other agents hold the node for --membership-restart-hold instead of
// taking its VIPs (the new agent starts only once they have dropped the old member and hold
// the node). Killing the same agent with SIGKILL (a crash) still fails over within
// failoverMax.
func TestL2AgentRestart(t *testing.T) {
	s := newScenario(t, "restart")
	winner, next := s.order[0], s.order[1]
	s.settle(t, winner)
	dst := netip.AddrPortFrom(s.v4, echoPort)
	held := holdConn(t, dst)
	held.waitServed(t, 5, 10*time.Second)
	probes := probe(s.v4)
	defer probes.close()
	announcedBefore := strings.Count(agentOf(next).Output(), `"Announcing VIP"`)
	watch := watchNeighbours(s, shared.macs[winner].String())

	t0 := time.Now()
	old := agentOf(winner)
	if err := syscall.Kill(old.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent on %s did not exit within 10 s of SIGTERM", winner)
	}
	exited := time.Since(t0)
	_ = old.Stop()
	if out := old.Output(); !logged(out, `"Stopped; rules stay in place"`, "15s") {
		t.Errorf("the agent on %s did not stop for a restart (restartHold 15s); output tail:\n%s", winner, tail(out, 20))
	}
	// The others' failure detectors drop the stopped member within about a second; they hold
	// the node instead of declaring it dead. Waiting for that before the new agent starts
	// covers the slow restart (a pod replaced), not only one faster than detection.
	restarting := `portico_agent_membership_nodes{state="restarting"} 1` + "\n"
	waitMetric(t, next, restarting, 10*time.Second)
	if m := metrics(t, next); !strings.Contains(m, `portico_agent_membership_nodes{state="dead"} 0`+"\n") {
		t.Errorf("%s counts a dead node while %s restarts", next, winner)
	}
	held.waitServed(t, 5, 10*time.Second)
	if err := startAgent(nodeByName(winner)); err != nil {
		t.Fatal(err)
	}
	back := time.Since(t0)
	waitMetric(t, next, `portico_agent_membership_nodes{state="restarting"} 0`+"\n", 10*time.Second)
	// The new agent announces again (its takeover burst); the others saw the node restart
	// and come back.
	arpingOnly(t, s.v4, winner, 10*time.Second)
	for _, n := range []string{next, s.order[2]} {
		if !logged(agentOf(n).Output(), "node restarting; keeping it", `"`+winner+`"`) {
			t.Errorf("%s did not log holding %s during its restart", n, winner)
		}
	}
	held.waitServed(t, 20, 10*time.Second)
	moved := watch.close()
	probes.close()
	sent, failed, _ := probes.window(t0, time.Now())
	t.Logf("SIGTERM: agent exited in %v, back and synced after %v; held connection served %d requests, alive; %d new connections, %d failed",
		exited.Round(time.Millisecond), back.Round(time.Millisecond), held.served.Load(), sent, failed)
	if len(moved) > 0 {
		t.Errorf("the client's neighbour entries left %s during the restart: %v", winner, moved)
	}
	if n := strings.Count(agentOf(next).Output(), `"Announcing VIP"`); n != announcedBefore {
		t.Errorf("%s announced a VIP during %s's restart", next, winner)
	}
	if failed > 0 {
		t.Errorf("%d of %d new connections failed during the restart", failed, sent)
	}
	held.close()

	// A crash is no restart: the next node takes over as fast as without the hold.
	res := s.trial(t, failureKill)
	t.Logf("SIGKILL: failover %v; %d requests in the %v after, %d failed", res.failover, res.sent, afterAnnounce, res.failed)
	heal(t, failureKill, winner)
	s.settle(t, winner)
}

// waitMetric waits until node's agent's /metrics contain line.
func waitMetric(tb testing.TB, node, line string, within time.Duration) {
	tb.Helper()
	end := time.Now().Add(within)
	for !strings.Contains(metrics(tb, node), line) {
		if time.Now().After(end) {
			tb.Fatalf("%s's metrics lack %q after %v", node, strings.TrimSpace(line), within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logged reports whether a line of out contains every part.
func logged(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
