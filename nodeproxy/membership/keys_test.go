package membership

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/portico-lb/portico/e2e/framework/ports"
)

// TestKeyRotation: three members rotate from one key to another in the documented three steps
// (add the new key as extra everywhere, make it primary everywhere, remove the old), one member
// at a time, and the view stays whole throughout: no member is ever suspected dead. A member
// that joins after the rotation with only the new key gets in; one with only the old key does
// not, and both sides count the messages they could not decrypt.
func TestKeyRotation(t *testing.T) {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := DeriveKey([]byte("old secret")), DeriveKey([]byte("new secret"))
	var failures [4]atomic.Int64
	startKeyed := func(i int, primary []byte, extra ...[]byte) *Membership {
		cfg := DefaultConfig()
		cfg.NodeName = fmt.Sprintf("node%d", i)
		cfg.BindAddr = netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		cfg.Port = port
		cfg.SecretKey, cfg.ExtraKeys = primary, extra
		cfg.RejoinInterval = 200 * time.Millisecond
		// Slower than the defaults, so that a loaded machine does not fail a member (1 s of
		// suspicion): what is tested is the keys (every decryption failure is counted).
		cfg.Timings.ProbeInterval, cfg.Timings.ProbeTimeout, cfg.Timings.SuspicionMult = 200*time.Millisecond, 100*time.Millisecond, 5
		cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 0})
		cfg.DecryptFailed = func(string) { failures[i-1].Add(1) }
		m, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Abort() })
		return m
	}
	ms := []*Membership{startKeyed(1, oldKey), startKeyed(2, oldKey), startKeyed(3, oldKey)}
	for _, m := range ms {
		m.SetPeers(addrs(3))
	}
	for _, m := range ms {
		waitView(t, m, 5*time.Second, "node1", "node2", "node3")
	}
	// Every view short of the three members from here on is a failure.
	var mu sync.Mutex
	var changes []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-m.Changes():
					if v := m.Alive(); len(v) != 3 || len(m.Dead()) != 0 {
						mu.Lock()
						changes = append(changes, fmt.Sprintf("%s: alive %v, dead %v", m.cfg.NodeName, v, m.Dead()))
						mu.Unlock()
					}
				}
			}
		}()
	}
	// Each step reaches the members one after another, some time apart, as a watched Secret
	// does: traffic between a member that has a step and one that has not yet must pass.
	step := func(name string, primary []byte, extra ...[]byte) {
		for _, m := range ms {
			if err := m.SetKeys(primary, extra); err != nil {
				t.Fatalf("%s: %s: %v", name, m.cfg.NodeName, err)
			}
			time.Sleep(200 * time.Millisecond) // a probe round and several gossip rounds with mixed keys
		}
	}
	step("add the new key", oldKey, newKey)
	step("promote the new key", newKey, oldKey)
	step("remove the old key", newKey)
	time.Sleep(1200 * time.Millisecond) // longer than the suspicion time
	close(stop)
	wg.Wait()
	if len(changes) > 0 {
		t.Errorf("the view changed during the rotation: %v", changes)
	}
	for i, m := range ms {
		if ks := m.Keys(); len(ks) != 1 || !bytes.Equal(ks[0], newKey) {
			t.Errorf("%s holds %d keys after the rotation, want the new one only", m.cfg.NodeName, len(ks))
		}
		if n := failures[i].Load(); n != 0 {
			t.Errorf("%s counted %d decryption failures during the rotation", m.cfg.NodeName, n)
		}
	}

	// After the rotation: the old key alone no longer gets in, and the failures are counted.
	stale := startKeyed(4, oldKey)
	stale.SetPeers(addrs(3))
	end := time.Now().Add(5 * time.Second)
	for failures[3].Load() == 0 || failures[0].Load()+failures[1].Load()+failures[2].Load() == 0 {
		if time.Now().After(end) {
			t.Fatalf("decryption failures counted: stale member %d, others %d %d %d", failures[3].Load(), failures[0].Load(), failures[1].Load(), failures[2].Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := stale.Alive(); len(v) != 1 {
		t.Errorf("a member with the removed key joined: %v", v)
	}
	if v := ms[0].Alive(); v["node4"] {
		t.Errorf("node1 let in a member with the removed key: %v", v)
	}
}

func TestSetKeysUnencrypted(t *testing.T) {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	m := start(t, 1, port, nil)
	if err := m.SetKeys(DeriveKey([]byte("x")), nil); err == nil {
		t.Error("an unencrypted member took keys")
	}
}

func TestDecryptFailureLines(t *testing.T) {
	for _, tc := range []struct{ line, peer string }{
		{"[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.12:7946", "127.0.0.12:7946"},
		{"[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=[fd00:c613::2]:7946", "[fd00:c613::2]:7946"},
		{"[DEBUG] memberlist: failed to join 198.18.0.3:7946: no installed keys could decrypt the message", "198.18.0.3:7946"},
		{"[ERR] memberlist: failed to receive: remote state is encrypted and encryption is not configured from=198.18.0.4:7946", "198.18.0.4:7946"},
		{"[ERR] memberlist: failed to receive: encryption is configured but remote state is not encrypted from=198.18.0.4:7946", "198.18.0.4:7946"},
		{"[DEBUG] memberlist: Stream connection from=198.18.0.4:7946", ""},
	} {
		var got []string
		w := logWriter{log: testr.New(t), decryptFailed: func(p string) { got = append(got, p) }}
		if _, err := w.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.peer == "" && len(got) != 0:
			t.Errorf("%q counted as a decryption failure", tc.line)
		case tc.peer != "" && (len(got) != 1 || got[0] != tc.peer):
			t.Errorf("%q: reported %q, want one failure from %s", tc.line, got, tc.peer)
		}
	}
}
