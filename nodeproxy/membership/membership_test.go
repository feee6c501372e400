package membership

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"

	"github.com/portico-lb/portico/e2e/framework/ports"
)

func start(t *testing.T, i, port int, key []byte) *Membership {
	t.Helper()
	return startWith(t, i, port, key, testr.NewWithOptions(t, testr.Options{Verbosity: 0}))
}

func startWith(t *testing.T, i, port int, key []byte, log logr.Logger) *Membership {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeName = fmt.Sprintf("node%d", i)
	cfg.BindAddr = netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
	cfg.Port = port
	cfg.SecretKey = key
	cfg.RejoinInterval = 200 * time.Millisecond
	cfg.Log = log
	m, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Abort() })
	return m
}

func addrs(n int) []netip.Addr {
	var out []netip.Addr
	for i := 1; i <= n; i++ {
		out = append(out, netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)}))
	}
	return out
}

// waitView waits until m's view is exactly want and returns how long that took.
func waitView(t *testing.T, m *Membership, within time.Duration, want ...string) time.Duration {
	t.Helper()
	return waitSet(t, m, "view", m.Alive, within, want)
}

// waitSet waits until get returns exactly want (the names true in it) and returns how long
// that took.
func waitSet(t *testing.T, m *Membership, what string, get func() map[string]bool, within time.Duration, want []string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := get()
		ok := len(got) == len(want)
		for _, w := range want {
			ok = ok && got[w]
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: %s %v, want %v after %v", m.cfg.NodeName, what, got, want, within)
		}
		select {
		case <-m.Changes():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// threeMembers starts node1..node3 on one port with one key, joined, each seeing all three.
func threeMembers(t *testing.T) (ms []*Membership, port int, key []byte) {
	t.Helper()
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	key, err = LoadSecretKey(writeFile(t, "s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	ms = []*Membership{start(t, 1, port, key), start(t, 2, port, key), start(t, 3, port, key)}
	for _, m := range ms {
		m.SetPeers(addrs(3))
	}
	for _, m := range ms {
		waitView(t, m, 5*time.Second, "node1", "node2", "node3")
	}
	return ms, port, key
}

func TestViewFollowsMembers(t *testing.T) {
	ms, port, key := threeMembers(t)
	for _, m := range ms {
		if d := m.Dead(); len(d) != 0 {
			t.Errorf("%s: dead = %v before any failure", m.cfg.NodeName, d)
		}
	}

	// A crash: the others drop it within the detection time (about 0.6 s, see doc.go).
	ms[2].Abort()
	for _, m := range ms[:2] {
		d := waitView(t, m, 3*time.Second, "node1", "node2")
		t.Logf("%s saw node3 dead after %v", m.cfg.NodeName, d)
		if d := m.Dead(); len(d) != 1 || !d["node3"] {
			t.Errorf("%s: dead = %v, want node3", m.cfg.NodeName, d)
		}
	}

	// The crashed node comes back: the rejoin loop merges it without a new SetPeers.
	back := start(t, 3, port, key)
	back.SetPeers(addrs(3))
	for _, m := range []*Membership{ms[0], ms[1], back} {
		waitView(t, m, 5*time.Second, "node1", "node2", "node3")
		if d := m.Dead(); len(d) != 0 {
			t.Errorf("%s: dead = %v after node3 came back", m.cfg.NodeName, d)
		}
	}

	// A graceful leave is seen faster than any failure detection could be.
	begin := time.Now()
	if err := back.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:2] {
		waitView(t, m, 3*time.Second, "node1", "node2")
	}
	if d := time.Since(begin); d > 300*time.Millisecond+time.Second {
		t.Errorf("leave took %v to be seen", d)
	}
}

func TestWrongKeyCannotJoin(t *testing.T) {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, 1, port, make([]byte, 32))
	other := make([]byte, 32)
	other[0] = 1
	b := start(t, 2, port, other)
	b.SetPeers(addrs(2))
	time.Sleep(time.Second)
	if v := a.Alive(); len(v) != 1 || !v["node1"] {
		t.Fatalf("node1 view %v: a member with another key got in", v)
	}
	if v := b.Alive(); len(v) != 1 || !v["node2"] {
		t.Fatalf("node2 view %v: joined a member with another key", v)
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.SecretKey = []byte("short")
	c.Timings.ProbeTimeout = c.Timings.ProbeInterval
	err := c.Validate()
	for _, want := range []string{"node name", "bind address", "secret key is 5 bytes", "probe timeout"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	c = DefaultConfig()
	c.NodeName, c.BindAddr = "n", netip.MustParseAddr("198.19.0.11")
	if err := c.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is a logger that keeps every line, to tell whether a view ever changed. It does
// not log to t: memberlist's goroutines may still write after the test ended; the lines are
// shown when the test failed.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) logger(t *testing.T) logr.Logger {
	t.Cleanup(func() {
		if t.Failed() {
			r.mu.Lock()
			t.Log("node1's log:\n" + strings.Join(r.lines, "\n"))
			r.mu.Unlock()
		}
	})
	return funcr.New(func(prefix, args string) {
		r.mu.Lock()
		r.lines = append(r.lines, args)
		r.mu.Unlock()
	}, funcr.Options{})
}

func (r *recorder) has(sub ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		all := true
		for _, s := range sub {
			all = all && strings.Contains(l, s)
		}
		if all {
			return true
		}
	}
	return false
}

// three starts three members that see each other; the first logs to rec.
func three(t *testing.T, rec *recorder) (ms []*Membership, port int) {
	t.Helper()
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	ms = []*Membership{startWith(t, 1, port, nil, rec.logger(t)), start(t, 2, port, nil), start(t, 3, port, nil)}
	for _, m := range ms {
		m.SetPeers(addrs(3))
	}
	for _, m := range ms {
		waitView(t, m, 5*time.Second, "node1", "node2", "node3")
	}
	return ms, port
}

// waitHeld waits until m holds exactly want.
func waitHeld(t *testing.T, m *Membership, within time.Duration, want ...string) time.Duration {
	t.Helper()
	return waitSet(t, m, "held", m.Held, within, want)
}

// A member that restarts within its hold never leaves the others' views: they hold it while
// memberlist sees it gone, and drop the hold when it is back.
func TestRestartKeepsTheNode(t *testing.T) {
	var rec recorder
	ms, port := three(t, &rec)
	// The hold outlasts any detection time, even on a loaded machine; node3's return ends it.
	if err := ms[2].Restart(time.Minute, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:2] {
		d := waitHeld(t, m, 30*time.Second, "node3")
		t.Logf("%s holds node3 after %v", m.cfg.NodeName, d)
		if v := m.Alive(); !v["node3"] || m.Dead()["node3"] {
			t.Errorf("%s: alive %v, dead %v while node3 restarts", m.cfg.NodeName, v, m.Dead())
		}
	}
	back := start(t, 3, port, nil)
	back.SetPeers(addrs(3))
	for _, m := range ms[:2] {
		waitHeld(t, m, 30*time.Second)
		waitView(t, m, time.Second, "node1", "node2", "node3")
	}
	waitView(t, back, 30*time.Second, "node1", "node2", "node3")
	if !rec.has(`"node"="node3"`, "held") {
		t.Error("node1 never logged holding node3")
	}
	if rec.has("Membership view changed", `"node"="node3"`, `"alive"=false`) {
		t.Error("node1's view lost node3 during its restart")
	}

	// The restarted member crashes: no hold, the others drop it within the detection time.
	begin := time.Now()
	back.Abort()
	for _, m := range ms[:2] {
		waitView(t, m, 30*time.Second, "node1", "node2")
		if h := m.Held(); len(h) != 0 {
			t.Errorf("%s holds %v after a crash", m.cfg.NodeName, h)
		}
	}
	t.Logf("crash after a restart seen in %v", time.Since(begin))
}

// A member that does not come back within its hold is dead once it ends, not at the
// detection time (about 0.6 s, see doc.go; longer on a loaded machine, when the hold may have
// ended before memberlist drops the node).
func TestRestartHoldEnds(t *testing.T) {
	var rec recorder
	ms, _ := three(t, &rec)
	const hold = 3 * time.Second
	begin := time.Now()
	if err := ms[2].Restart(hold, time.Second); err != nil {
		t.Fatal(err)
	}
	waitView(t, ms[0], hold+30*time.Second, "node1", "node2")
	d := time.Since(begin)
	if d < hold {
		t.Errorf("node3 dropped after %v, before its hold of %v ended", d, hold)
	}
	t.Logf("node3 dropped %v after announcing a hold of %v", d, hold)
	if d := ms[0].Dead(); !d["node3"] || len(ms[0].Held()) != 0 {
		t.Errorf("dead %v, held %v after the hold", d, ms[0].Held())
	}
}

// A member that joins while another restarts holds that one too, as the member it joined.
func TestHoldPassedToAJoiningMember(t *testing.T) {
	var rec recorder
	ms, port := three(t, &rec)
	if err := ms[2].Restart(time.Minute, time.Second); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, ms[0], 30*time.Second, "node3")
	if err := ms[1].Abort(); err != nil {
		t.Fatal(err)
	}
	waitView(t, ms[0], 30*time.Second, "node1", "node3")
	fresh := start(t, 2, port, nil)
	fresh.SetPeers(addrs(3))
	waitView(t, fresh, 30*time.Second, "node1", "node2", "node3")
	if h := fresh.Held(); !h["node3"] {
		t.Errorf("the joining member holds %v, want node3", h)
	}
}

// TestAskReassert: a member asked by another fires ReassertAsked; the others do not.
func TestAskReassert(t *testing.T) {
	ms, _, _ := threeMembers(t)
	ms[2].AskReassert("node1")
	select {
	case <-ms[0].ReassertAsked():
	case <-time.After(5 * time.Second):
		t.Fatal("node1 was not asked to announce again within 5 s")
	}
	select {
	case <-ms[1].ReassertAsked():
		t.Error("node2 was asked too")
	default:
	}
	ms[2].AskReassert("node9") // not a member: nothing to send, nothing fails
}

// TestSilentPeersDoNotDelayJoins: peers that accept a connection and never answer (a hung
// node: memberlist waits its 10 s TCP timeout for each) neither block SetPeers nor delay the
// join of a peer that answers, and their joins are retried with back-off.
func TestSilentPeersDoNotDelayJoins(t *testing.T) {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	var silent []netip.Addr
	accepted := make(chan struct{}, 100)
	for i := 1; i <= 3; i++ {
		a := netip.AddrFrom4([4]byte{127, 0, 0, byte(50 + i)})
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				accepted <- struct{}{}
			}
		}()
		silent = append(silent, a)
	}
	n1, n2 := start(t, 1, port, nil), start(t, 2, port, nil)
	begin := time.Now()
	n1.SetPeers(append(silent, addrs(2)...)) // the silent ones first, as memberlist would try them
	if d := time.Since(begin); d > 100*time.Millisecond {
		t.Errorf("SetPeers took %v; want it to return at once", d)
	}
	if d := waitView(t, n1, 2*time.Second, "node1", "node2"); d > time.Second {
		t.Errorf("node2 joined after %v behind three silent peers", d)
	}
	waitView(t, n2, 2*time.Second, "node1", "node2")
	// Each silent peer was dialled once, in parallel, and is not dialled again while its join
	// waits (the rejoin loop ticks every 200 ms here).
	deadline := time.After(3 * time.Second)
	for got := 0; got < 3; got++ {
		select {
		case <-accepted:
		case <-deadline:
			t.Fatalf("%d of the 3 silent peers dialled", got)
		}
	}
	select {
	case <-accepted:
		t.Error("a silent peer dialled again while its first join still waits")
	default:
	}
}
