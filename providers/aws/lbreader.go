package aws

import (
	"context"
	"slices"
	"sync"
	"time"
)

// lbReader coalesces the reads of a steady-state resync: the Services' Ensure calls, made
// concurrently by the controller's workers, each need "does my load balancer exist, and what are
// its tags". Instead of two calls per Service, one reader per kind gathers the names asked for
// within window into one batch of at most batchMax names, fills the rest of the batch with other
// names it was asked for before and holds no fresh answer for (read-ahead: a controller has
// fewer workers than a batch has room), and answers them all from one DescribeLoadBalancers and
// one DescribeTags call. An answer stays fresh for maxAge; the provider forgets a name whenever
// it writes to that load balancer, so a stale answer can only hide a change made outside the
// provider, which the periodic full verification repairs (applied.go).
type lbReader struct {
	// fetch describes the named load balancers and their tags; a missing name has no entry.
	fetch    func(ctx context.Context, names []string) (map[string]*lbRecord, error)
	window   time.Duration
	maxAge   time.Duration
	batchMax int
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]lbEntry
	// known are the names asked for (and found) before: candidates for read-ahead.
	known map[string]bool
	// open collects names until its window ends or it is full; busy maps each name in an open
	// or running batch to it.
	open *lbBatch
	busy map[string]*lbBatch
}

type lbEntry struct {
	rec *lbRecord // nil: no such load balancer
	at  time.Time
}

type lbBatch struct {
	names []string
	full  chan struct{} // closed when names reaches batchMax
	done  chan struct{} // closed when res and err are set
	res   map[string]*lbRecord
	err   error
}

// fetchTimeout bounds one batch: its reads serve several callers, so no single caller's context
// cancels them.
const fetchTimeout = 30 * time.Second

func newLBReader(fetch func(context.Context, []string) (map[string]*lbRecord, error), window, maxAge time.Duration, batchMax int, now func() time.Time) *lbReader {
	return &lbReader{
		fetch: fetch, window: window, maxAge: maxAge, batchMax: batchMax, now: now,
		entries: map[string]lbEntry{}, known: map[string]bool{}, busy: map[string]*lbBatch{},
	}
}

// get returns the load balancer named name with its tags, nil when it does not exist.
func (r *lbReader) get(ctx context.Context, name string) (*lbRecord, error) {
	r.mu.Lock()
	if e, ok := r.entries[name]; ok && r.now().Sub(e.at) < r.maxAge {
		r.mu.Unlock()
		return e.rec, nil
	}
	if b := r.busy[name]; b != nil {
		r.mu.Unlock()
		return b.wait(ctx, name)
	}
	if b := r.open; b != nil {
		b.names = append(b.names, name)
		r.busy[name] = b
		if len(b.names) == r.batchMax {
			r.open = nil
			close(b.full)
		}
		r.mu.Unlock()
		return b.wait(ctx, name)
	}
	b := &lbBatch{names: []string{name}, full: make(chan struct{}), done: make(chan struct{})}
	r.busy[name] = b
	if r.batchMax > 1 {
		r.open = b
	} else {
		close(b.full)
	}
	r.mu.Unlock()
	r.run(ctx, b)
	return b.wait(ctx, name)
}

// run is done by the caller that opened the batch: wait for the window (or a full batch), fill
// the batch with read-ahead names, read, and hand the answers to every waiting caller.
func (r *lbReader) run(ctx context.Context, b *lbBatch) {
	t := time.NewTimer(r.window)
	select {
	case <-t.C:
	case <-b.full:
		t.Stop()
	}
	r.mu.Lock()
	if r.open == b {
		r.open = nil
	}
	now := r.now()
	var ahead []string
	for n := range r.known {
		e, ok := r.entries[n]
		if r.busy[n] == nil && (!ok || now.Sub(e.at) >= r.maxAge) {
			ahead = append(ahead, n)
		}
	}
	// Oldest answers first, then by name, so that successive batches cover every known name.
	slices.SortFunc(ahead, func(x, y string) int {
		if c := r.entries[x].at.Compare(r.entries[y].at); c != 0 {
			return c
		}
		if x < y {
			return -1
		}
		return 1
	})
	for _, n := range ahead {
		if len(b.names) >= r.batchMax {
			break
		}
		b.names = append(b.names, n)
		r.busy[n] = b
	}
	r.mu.Unlock()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	res, err := r.fetch(fctx, b.names)
	cancel()

	r.mu.Lock()
	at := r.now()
	for _, n := range b.names {
		delete(r.busy, n)
		if err != nil {
			continue
		}
		r.entries[n] = lbEntry{rec: res[n], at: at}
		if res[n] == nil {
			delete(r.known, n)
		} else {
			r.known[n] = true
		}
	}
	r.mu.Unlock()
	b.res, b.err = res, err
	close(b.done)
}

func (b *lbBatch) wait(ctx context.Context, name string) (*lbRecord, error) {
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.res[name], nil
}

// forget drops what the reader knows of name: the provider is about to change or delete it.
func (r *lbReader) forget(name string) {
	r.mu.Lock()
	delete(r.entries, name)
	delete(r.known, name)
	r.mu.Unlock()
}

// remember makes name a read-ahead candidate (a load balancer the provider just converged).
func (r *lbReader) remember(name string) {
	r.mu.Lock()
	r.known[name] = true
	r.mu.Unlock()
}
