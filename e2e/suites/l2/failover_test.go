package l2

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/nodeproxy/announce/l2"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

var trials = flag.Int("l2agent.trials", 10, "failover trials per failure in BenchmarkL2Failover")

const (
	probeEvery     = 50 * time.Millisecond
	probeTimeout   = 500 * time.Millisecond
	failoverMax    = 5 * time.Second // a trial fails beyond this
	afterAnnounce  = 5 * time.Second // requests counted after the new node announced
	settleMax      = 30 * time.Second
	failureKill    = "agent-kill"
	failureLinkCut = "link-cut"
)

// prober opens a new TCP connection to a VIP every 50 ms from the client (each one balanced
// afresh over the endpoints) and records which succeeded.
type prober struct {
	mu       sync.Mutex
	results  []result
	lastSent time.Time // when the newest request was sent
	stop     chan struct{}
	wg       sync.WaitGroup

	closeOnce sync.Once
}

type result struct {
	sent time.Time
	ok   bool
	pod  string
}

func probe(v netip.Addr) *prober {
	p := &prober{stop: make(chan struct{})}
	client := shared.Lab.Clients()[0]
	dst := netip.AddrPortFrom(v, echoPort)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tk := time.NewTicker(probeEvery)
		defer tk.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tk.C:
			}
			sent := time.Now()
			p.mu.Lock()
			p.lastSent = sent
			p.mu.Unlock()
			p.wg.Add(1)
			go func(sent time.Time) {
				defer p.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
				defer cancel()
				r, err := client.Request(ctx, "tcp", dst)
				p.mu.Lock()
				p.results = append(p.results, result{sent: sent, ok: err == nil, pod: r.Server})
				p.mu.Unlock()
			}(sent)
		}
	}()
	return p
}

// close stops probing and waits for the requests in flight; calling it again does nothing.
func (p *prober) close() {
	p.closeOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
}

// waitSent waits until a request was sent after t.
func (p *prober) waitSent(t time.Time, within time.Duration) bool {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		p.mu.Lock()
		ok := p.lastSent.After(t)
		p.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// window counts the requests sent in [from, to) and how many failed.
func (p *prober) window(from, to time.Time) (sent, failed int, pods map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pods = map[string]int{}
	for _, r := range p.results {
		if r.sent.Before(from) || !r.sent.Before(to) {
			continue
		}
		sent++
		if !r.ok {
			failed++
		} else {
			pods[r.pod]++
		}
	}
	return sent, failed, pods
}

// waitServed waits until a request sent after since succeeds.
func (p *prober) waitServed(since time.Time, within time.Duration) bool {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		p.mu.Lock()
		ok := slices.ContainsFunc(p.results, func(r result) bool { return r.ok && r.sent.After(since) })
		p.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// trialResult is one failover.
type trialResult struct {
	failover map[string]time.Duration // family -> failure to the client's neighbour entry on the new node
	sent     int                      // requests sent in the 5 s after the new node announced
	failed   int
}

// scenario is the Service, its VIPs and their election order.
type scenario struct {
	h      *netlink.Handle
	v4, v6 netip.Addr
	order  []string
	name   string
}

func newScenario(tb testing.TB, name string) *scenario {
	setup(tb)
	backends(tb)
	s := &scenario{h: clientHandle(tb), name: name}
	s.v4, s.v6, s.order = vips(tb)
	service(tb, name, s.v4, s.v6)
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		for _, n := range shared.Lab.Nodes() {
			var keep []string
			for _, line := range strings.Split(agentOf(n.Name).Output(), "\n") {
				if !strings.Contains(line, `"Synced"`) && !strings.Contains(line, "reflector") {
					keep = append(keep, line)
				}
			}
			if len(keep) > 80 {
				keep = keep[len(keep)-80:]
			}
			tb.Logf("agent on %s, output tail:\n%s", n.Name, strings.Join(keep, "\n"))
		}
	})
	tb.Logf("VIPs %s and %s, election order %v", s.v4, s.v6, s.order)
	return s
}

// settle waits until the client resolves both VIPs to node and is served through both.
func (s *scenario) settle(tb testing.TB, node string) {
	tb.Helper()
	for _, v := range []netip.Addr{s.v4, s.v6} {
		p := probe(v)
		ok := p.waitServed(time.Now(), settleMax)
		p.close()
		if !ok {
			tb.Fatalf("%s not served within %v", v, settleMax)
		}
		if _, ok := waitNeighbour(s.h, v, node, settleMax); !ok {
			tb.Fatalf("client's neighbour for %s is %v (%s), want %s's %s", v, netlab.Neighbour(s.h, v), nodeOfMAC(netlab.Neighbour(s.h, v)), node, shared.macs[node])
		}
	}
}

// fail makes node fail: its agent killed, or its link to the switch cut.
func fail(tb testing.TB, failure, node string) {
	switch failure {
	case failureKill:
		if err := syscall.Kill(agentOf(node).Pid(), syscall.SIGKILL); err != nil {
			tb.Fatal(err)
		}
	case failureLinkCut:
		if _, err := shared.Lab.Switch().Exec(context.Background(), "ip", "link", "set", node, "down"); err != nil {
			tb.Fatal(err)
		}
	}
}

// heal undoes fail.
func heal(tb testing.TB, failure, node string) {
	switch failure {
	case failureKill:
		_ = agentOf(node).Stop()
		if err := startAgent(nodeByName(node)); err != nil {
			tb.Fatal(err)
		}
	case failureLinkCut:
		if _, err := shared.Lab.Switch().Exec(context.Background(), "ip", "link", "set", node, "up"); err != nil {
			tb.Fatal(err)
		}
	}
}

// trial runs one failover of the first node in the order and checks that the second takes
// over with no failed request once it announced. It leaves the failure in place.
func (s *scenario) trial(tb testing.TB, failure string) trialResult {
	tb.Helper()
	winner, next := s.order[0], s.order[1]
	probes := map[netip.Addr]*prober{s.v4: probe(s.v4), s.v6: probe(s.v6)}
	defer func() {
		for _, p := range probes {
			p.close()
		}
	}()
	// Both probers are served before the failure: a failure after it is the failover's.
	started := time.Now()
	for v, p := range probes {
		if !p.waitServed(started, settleMax) {
			tb.Fatalf("%s: %s not served before the failure", failure, v)
		}
	}
	res := trialResult{failover: map[string]time.Duration{}}
	t0 := time.Now()
	fail(tb, failure, winner)
	var announced time.Time
	for _, v := range []netip.Addr{s.v4, s.v6} {
		at, ok := waitNeighbour(s.h, v, next, failoverMax)
		if !ok {
			tb.Fatalf("%s: %s neighbour did not move to %s within %v (now %s)", failure, v, next, failoverMax, nodeOfMAC(netlab.Neighbour(s.h, v)))
		}
		res.failover[family(v)] = at.Sub(t0)
		if at.After(announced) {
			announced = at
		}
	}
	// The window is complete once a request was sent after it; close then waits for the
	// requests in flight.
	for v, p := range probes {
		if !p.waitSent(announced.Add(afterAnnounce), afterAnnounce+settleMax) {
			tb.Fatalf("%s: the prober of %s stopped sending", failure, v)
		}
		p.close()
	}
	for v, p := range probes {
		sent, failed, pods := p.window(announced, announced.Add(afterAnnounce))
		res.sent += sent
		res.failed += failed
		if failed > 0 {
			tb.Errorf("%s: %d of %d requests to %s failed in the %v after %s announced (served by %v)", failure, failed, sent, v, afterAnnounce, next, pods)
		}
		if failure == failureLinkCut && pods[shared.pods[winner].Name] > 0 {
			tb.Errorf("%s: %d requests to %s answered by the cut node's pod", failure, pods[shared.pods[winner].Name], v)
		}
	}
	return res
}

func family(v netip.Addr) string {
	if v.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// TestL2Announce: see the package doc.
func TestL2Announce(t *testing.T) {
	s := newScenario(t, "announce")
	winner, next := s.order[0], s.order[1]
	s.settle(t, winner)
	arpingOnly(t, s.v4, winner, 0)
	waitEvent(t, s.name, l2.ReasonAnnouncing, "node "+winner+" announces "+s.v4.String())

	for _, failure := range []string{failureKill, failureLinkCut} {
		t.Run(failure, func(t *testing.T) {
			res := s.trial(t, failure)
			t.Logf("%s: failover %v; %d requests in the %v after, %d failed", failure, res.failover, res.sent, afterAnnounce, res.failed)
			waitEvent(t, s.name, l2.ReasonAnnouncing, fmt.Sprintf("node %s announces %s by ARP (previously: %s), %s by NDP (previously: %s)",
				next, s.v4, winner, s.v6, winner))
			m := metrics(t, next)
			for _, want := range []string{
				`portico_agent_l2_announced{vip="` + s.v4.String() + `"} 1`,
				`portico_agent_l2_announced{vip="` + s.v6.String() + `"} 1`,
				`portico_agent_membership_nodes{state="alive"} 2`,
				`portico_agent_membership_nodes{state="dead"} 1`,
			} {
				if !strings.Contains(m, want+"\n") {
					t.Errorf("%s's metrics lack %s", next, want)
				}
			}
			if !strings.Contains(m, "portico_agent_l2_takeovers_total ") || strings.Contains(m, "portico_agent_l2_takeovers_total 0\n") {
				t.Errorf("%s's metrics count no takeover", next)
			}
			if failure == failureLinkCut {
				// A partition: the cut-off node still sees itself alone and keeps announcing
				// (nobody hears it); the others elected next.
				if out := agentOf(winner).Output(); strings.Contains(out, `"Withdrawing VIP"`) {
					t.Errorf("the isolated %s withdrew: a node cut off cannot tell a partition from the others' death", winner)
				}
			}
			heal(t, failure, winner)
			// The VIPs return to the first node of the order, and only it answers once the
			// memberships merged (after a partition, both sides announce until then).
			healed := time.Now()
			s.settle(t, winner)
			arpingOnly(t, s.v4, winner, 10*time.Second)
			t.Logf("%s: one announcer again %v after healing", failure, time.Since(healed).Round(time.Millisecond))
			if !strings.Contains(agentOf(next).Output(), `"Withdrawing VIP"`) {
				t.Errorf("%s did not log withdrawing the VIPs after %s came back", next, winner)
			}
		})
	}
}

// metrics reads node's agent's /metrics over the lab's root link.
func metrics(tb testing.TB, node string) string {
	tb.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + netip.AddrPortFrom(nodeByName(node).Addr, 10249).String() + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// waitEvent waits for an Event with reason on the Service whose note contains note.
func waitEvent(tb testing.TB, svc, reason, note string) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var seen []string
	for time.Now().Before(deadline) {
		list, err := shared.CS.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		seen = seen[:0]
		for _, ev := range list.Items {
			if ev.Regarding.Name == svc && ev.Reason == reason {
				if strings.Contains(ev.Note, note) {
					return
				}
				seen = append(seen, ev.Note)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("no %s Event on %s with %q; seen: %s", reason, svc, note, fmt.Sprint(seen))
}
