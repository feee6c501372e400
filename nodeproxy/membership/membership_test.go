package membership

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/portico-lb/portico/e2e/framework/ports"
)

func start(t *testing.T, i, port int, key []byte) *Membership {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeName = fmt.Sprintf("node%d", i)
	cfg.BindAddr = netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
	cfg.Port = port
	cfg.SecretKey = key
	cfg.RejoinInterval = 200 * time.Millisecond
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 0})
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
	start := time.Now()
	for {
		got := m.Alive()
		ok := len(got) == len(want)
		for _, w := range want {
			ok = ok && got[w]
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: view %v, want %v after %v", m.cfg.NodeName, got, want, within)
		}
		select {
		case <-m.Changes():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestViewFollowsMembers(t *testing.T) {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	key, err := LoadSecretKey(writeFile(t, "s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	ms := []*Membership{start(t, 1, port, key), start(t, 2, port, key), start(t, 3, port, key)}
	for _, m := range ms {
		m.SetPeers(addrs(3))
	}
	for _, m := range ms {
		waitView(t, m, 5*time.Second, "node1", "node2", "node3")
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
