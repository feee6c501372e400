package aws

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers"
)

// fakeFetch records the batches asked for and answers every name but "missing".
type fakeFetch struct {
	mu      sync.Mutex
	batches [][]string
	err     error
}

func (f *fakeFetch) fetch(_ context.Context, names []string) (map[string]*lbRecord, error) {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Sorted(slices.Values(names)))
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := map[string]*lbRecord{}
	for _, n := range names {
		if n != "missing" {
			out[n] = &lbRecord{Name: n}
		}
	}
	return out, nil
}

func TestLBReader(t *testing.T) {
	ctx := context.Background()
	var clock time.Time
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	f := &fakeFetch{}
	r := newLBReader(f.fetch, 5*time.Millisecond, 10*time.Second, 20, now)

	// 45 names asked for concurrently, 4 at a time: batches of at most 20; each name read once.
	names := make([]string, 45)
	for i := range names {
		names[i] = fmt.Sprintf("lb%02d", i)
	}
	getAll := func() {
		t.Helper()
		work := make(chan string)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for n := range work {
					rec, err := r.get(ctx, n)
					if err != nil || rec == nil || rec.Name != n {
						t.Errorf("get(%s) = %+v, %v", n, rec, err)
					}
				}
			})
		}
		for _, n := range names {
			work <- n
		}
		close(work)
		wg.Wait()
	}
	getAll()
	var seen []string
	for _, b := range f.batches {
		if len(b) > 20 {
			t.Errorf("batch of %d names", len(b))
		}
		seen = append(seen, b...)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, names) {
		t.Errorf("first round read %v, want each of the 45 names once", seen)
	}

	// Second round past maxAge: read-ahead of the known names makes it 3 batches, not 12.
	advance(11 * time.Second)
	f.batches = nil
	getAll()
	if len(f.batches) != 3 {
		t.Errorf("second round made %d batches, want 3 (45 known names, 20 per batch): %v", len(f.batches), f.batches)
	}

	// Within maxAge: no read at all; after forget: that name is read again, alone or batched.
	f.batches = nil
	getAll()
	if len(f.batches) != 0 {
		t.Errorf("fresh answers were read again: %v", f.batches)
	}
	r.forget("lb07")
	if _, err := r.get(ctx, "lb07"); err != nil || len(f.batches) != 1 || !slices.Contains(f.batches[0], "lb07") {
		t.Errorf("after forget: %v, batches %v", err, f.batches)
	}

	// A missing load balancer answers nil and is no read-ahead candidate afterwards.
	if rec, err := r.get(ctx, "missing"); rec != nil || err != nil {
		t.Errorf("get(missing) = %+v, %v", rec, err)
	}
	if r.known["missing"] {
		t.Errorf("a missing name stays a read-ahead candidate")
	}

	// An error reaches every caller of the batch and caches nothing.
	advance(11 * time.Second)
	f.err = errors.New("throttled")
	if _, err := r.get(ctx, "lb01"); err == nil {
		t.Errorf("get with a failing fetch succeeded")
	}
	f.err = nil
	f.batches = nil
	if _, err := r.get(ctx, "lb01"); err != nil || len(f.batches) != 1 {
		t.Errorf("after an error: %v, batches %v", err, f.batches)
	}
}

// TestDesiredHash: the applied hash follows everything converged (nodes, ports, annotations)
// and nothing else (warnings, map order).
func TestDesiredHash(t *testing.T) {
	p := modelProvider(NLB)
	nodes := []providers.Node{node("a", "aws:///us-east-1a/i-a", nil), node("b", "aws:///us-east-1b/i-b", nil)}
	hashOf := func(mut func(lb *providers.LoadBalancer)) string {
		lb := testLB("web", nodes)
		optsOf(lb).Kind = NLB
		optsOf(lb).AdditionalTags = map[string]string{"a": "1", "b": "2", "c": "3"}
		mut(lb)
		d, err := p.desired(lb)
		if err != nil {
			t.Fatal(err)
		}
		return desiredHash(d)
	}
	base := hashOf(func(*providers.LoadBalancer) {})
	if again := hashOf(func(*providers.LoadBalancer) {}); again != base {
		t.Errorf("hash not stable: %s, %s", base, again)
	}
	if h := hashOf(func(lb *providers.LoadBalancer) { optsOf(lb).ProxyProtocol = true }); h != base {
		t.Errorf("a setting that only warns changed the hash")
	}
	for name, mut := range map[string]func(lb *providers.LoadBalancer){
		"node removed": func(lb *providers.LoadBalancer) { lb.Nodes = nodes[:1] },
		"port added": func(lb *providers.LoadBalancer) {
			lb.Ports = append(lb.Ports, providers.Port{Name: "b", Protocol: providers.UDP, Port: 53, NodePort: 30053})
		},
		"source range": func(lb *providers.LoadBalancer) {
			lb.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}
		},
		"tag":           func(lb *providers.LoadBalancer) { optsOf(lb).AdditionalTags["d"] = "4" },
		"health check":  func(lb *providers.LoadBalancer) { lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000 },
		"cross-zone on": func(lb *providers.LoadBalancer) { yes := true; optsOf(lb).CrossZone = &yes },
	} {
		if h := hashOf(mut); h == base {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}
