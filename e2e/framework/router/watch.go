package router

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// RouteWatch polls a prefix's next hops, in bird's table and in the router's kernel, and
// records every moment they were not the expected ones: for tests that assert a route stayed
// in place through a change (an agent's graceful restart, a helm upgrade).
type RouteWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	gaps  []string
	polls int
}

// WatchNextHops starts polling b (and its host's kernel) every interval for prefix's next
// hops, expecting want (sorted as NextHops returns them); Stop ends it.
func WatchNextHops(b *Bird, prefix netip.Prefix, want []netip.Addr, interval time.Duration) *RouteWatch {
	want = slices.Clone(want)
	slices.SortFunc(want, netip.Addr.Compare)
	ctx, cancel := context.WithCancel(context.Background())
	w := &RouteWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			birdHops, err1 := b.NextHops(ctx, prefix)
			kernel, err2 := KernelNextHops(b.Host, prefix)
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.polls++
			if err1 != nil || err2 != nil || !slices.Equal(birdHops, want) || !slices.Equal(kernel, want) {
				w.gaps = append(w.gaps, fmt.Sprintf("%s: bird %v (%v), kernel %v (%v)", time.Now().Format("15:04:05.000"), birdHops, err1, kernel, err2))
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Seen returns the polls so far and the moments the next hops were not the expected ones.
func (w *RouteWatch) Seen() (polls int, gaps []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, slices.Clone(w.gaps)
}

// Stop ends the watch and returns what it saw.
func (w *RouteWatch) Stop() (polls int, gaps []string) {
	w.cancel()
	<-w.done
	return w.Seen()
}
