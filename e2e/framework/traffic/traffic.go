// Package traffic is a lab client's continuous load on a load balancer's address, for suites
// that change something under traffic (a helm upgrade, a migration) and must count what the
// change broke: held connections, each writing a line and reading its echo in turn (a reset
// one is counted and replaced by a new held connection), and a loop opening a new connection
// per request to an echo server (e2e/tools/echoserver). Failed requests on new connections
// are kept with their times, so that a suite can report the longest window in which new
// requests failed, and the slowest request that succeeded.
//
//	load := traffic.Start(t, client, target, traffic.Options{Held: 4})
//	load.WaitRounds(t, 5, "traffic flowing")   // every worker served 5 more requests
//	res := load.Stop()                          // counts, failures, resets, windows
package traffic

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// Options shape a Load.
type Options struct {
	// Held is the number of held connections.
	Held int
	// Pace is the pause between two requests of one worker; zero means 20 ms.
	Pace time.Duration
	// Timeout bounds each request (a new connection: connect and read the greeting; on a held
	// connection: write and read the echo); zero means 10 s.
	Timeout time.Duration
	// TolerateFailures keeps WaitRounds waiting through failed requests on new connections
	// (the caller judges them from the Result, e.g. by the longest failed window); by default
	// the first one ends the wait with an error.
	TolerateFailures bool
}

// Load is a running client load on one target.
type Load struct {
	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	onHeld atomic.Int64
	rounds []atomic.Int64 // per worker (held connections, then the new-connection loop)

	mu       sync.Mutex
	attempts []attempt // of the new-connection loop, in order
	failed   []string  // on new connections, and opening held connections
	resets   []string  // of held connections
	resetAt  []time.Time
	stopped  *Result
}

// attempt is one request of the new-connection loop.
type attempt struct {
	start, end time.Time
	ok         bool
}

// Result is what a Load saw.
type Result struct {
	// OK is the number of requests served, OnHeld those over held connections.
	OK, OnHeld int64
	// NewRequests is the number of requests on new connections, served or failed.
	NewRequests int
	// Failed are the failed requests on new connections (and failed openings of held
	// connections), Resets the held connections that broke.
	Failed, Resets []string
	// ResetAt are the times the held connections in Resets broke (when the failed request
	// returned), in the same order.
	ResetAt []time.Time
	// FailedNew is the number of failed requests on new connections.
	FailedNew int
	// LongestFailure is the longest window in which requests on new connections failed: from
	// the start of the first failed request of a run of consecutive failures to the start of
	// the next request that succeeded (or the end of the run's last request when none did).
	// Zero when none failed.
	LongestFailure time.Duration
	// LongestFailureAt is when that window began.
	LongestFailureAt time.Time
	// SlowestNew is the longest time a successful request on a new connection took (a SYN
	// retransmitted while no node answered shows here, not as a failure).
	SlowestNew time.Duration
}

// Start starts the load from client on target; t's cleanup stops it.
func Start(t testing.TB, client *netlab.Host, target netip.AddrPort, o Options) *Load {
	l := Run(client, target, o)
	t.Cleanup(func() { l.Stop() })
	return l
}

// Run is Start for a program that is not a test (the demo): the caller must call Stop.
func Run(client *netlab.Host, target netip.AddrPort, o Options) *Load {
	if o.Pace == 0 {
		o.Pace = 20 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{opts: o, cancel: cancel, rounds: make([]atomic.Int64, o.Held+1)}
	for i := range o.Held {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				dctx, dcancel := context.WithTimeout(ctx, o.Timeout)
				conn, err := client.DialTCP(dctx, target)
				dcancel()
				if err != nil {
					if ctx.Err() == nil {
						l.record(&l.failed, "opening held connection %d: %v", i, err)
					}
					return
				}
				if err := l.hold(ctx, i, conn); err != nil && ctx.Err() == nil {
					at := time.Now()
					l.mu.Lock()
					l.resets = append(l.resets, fmt.Sprintf("%s held connection %d: %v", at.Format("15:04:05.000"), i, err))
					l.resetAt = append(l.resetAt, at)
					l.mu.Unlock()
				}
			}
		})
	}
	l.wg.Go(func() {
		for seq := 0; ctx.Err() == nil; seq++ {
			start := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, o.Timeout)
			_, err := client.Request(rctx, "tcp", target)
			rcancel()
			if ctx.Err() != nil {
				return
			}
			end := time.Now()
			l.mu.Lock()
			l.attempts = append(l.attempts, attempt{start: start, end: end, ok: err == nil})
			if err != nil {
				l.failed = append(l.failed, fmt.Sprintf("%s new connection %d: %v", start.Format("15:04:05.000"), seq, err))
			}
			l.mu.Unlock()
			if err == nil {
				l.ok.Add(1)
				l.rounds[o.Held].Add(1)
			}
			if !pause(ctx, o.Pace) {
				return
			}
		}
	})
	return l
}

func (l *Load) record(list *[]string, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*list = append(*list, fmt.Sprintf(format, args...))
}

// hold runs requests over conn until ctx ends (nil) or a request fails.
func (l *Load) hold(ctx context.Context, i int, conn net.Conn) error {
	defer conn.Close()
	rd := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(l.opts.Timeout))
	greeting, err := rd.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the greeting: %w", err)
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		line := fmt.Sprintf("conn %d request %d\n", i, seq)
		_ = conn.SetDeadline(time.Now().Add(l.opts.Timeout))
		if _, err := conn.Write([]byte(line)); err != nil {
			return fmt.Errorf("(%s) request %d: write: %w", strings.TrimSpace(greeting), seq, err)
		}
		got, err := rd.ReadString('\n')
		if err != nil || got != line {
			return fmt.Errorf("(%s) request %d: read %q: %v", strings.TrimSpace(greeting), seq, got, err)
		}
		l.ok.Add(1)
		l.onHeld.Add(1)
		l.rounds[i].Add(1)
		if !pause(ctx, l.opts.Pace) {
			return nil
		}
	}
	return nil
}

// pause paces a load loop (the request rate, not a wait for a state); false when ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// WaitRounds waits until every worker has completed n more requests than now; a failed request
// on a new connection ends the wait, unless Options.TolerateFailures.
func (l *Load) WaitRounds(t testing.TB, n int64, what string) {
	t.Helper()
	start := make([]int64, len(l.rounds))
	for i := range l.rounds {
		start[i] = l.rounds[i].Load()
	}
	l.mu.Lock()
	failedBefore := len(l.failed)
	l.mu.Unlock()
	wait.For(t, 2*time.Minute, what, func() error {
		l.mu.Lock()
		failed := slices.Clone(l.failed[failedBefore:])
		l.mu.Unlock()
		if len(failed) > 0 && !l.opts.TolerateFailures {
			return wait.Stop(fmt.Errorf("%d requests failed: %s", len(failed), failed[0]))
		}
		for i := range l.rounds {
			if got := l.rounds[i].Load() - start[i]; got < n {
				return fmt.Errorf("worker %d: %d of %d requests", i, got, n)
			}
		}
		return nil
	})
}

// Stop ends the load (once; later calls return the same Result).
func (l *Load) Stop() Result {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped != nil {
		return *l.stopped
	}
	r := Result{OK: l.ok.Load(), OnHeld: l.onHeld.Load(), Failed: slices.Clone(l.failed), Resets: slices.Clone(l.resets),
		ResetAt: slices.Clone(l.resetAt), NewRequests: len(l.attempts)}
	r.FailedNew, r.LongestFailure, r.LongestFailureAt, r.SlowestNew = summarize(l.attempts)
	l.stopped = &r
	return r
}

// summarize returns the failed attempts, the longest window of consecutive failures (see
// Result.LongestFailure) and when it began, and the slowest successful attempt.
func summarize(as []attempt) (failed int, longest time.Duration, at time.Time, slowest time.Duration) {
	var runStart time.Time
	var runEnd time.Time
	inRun := false
	closeRun := func(end time.Time) {
		if d := end.Sub(runStart); d > longest {
			longest, at = d, runStart
		}
		inRun = false
	}
	for _, a := range as {
		if a.ok {
			if d := a.end.Sub(a.start); d > slowest {
				slowest = d
			}
			if inRun {
				closeRun(a.start)
			}
			continue
		}
		failed++
		if !inRun {
			runStart, inRun = a.start, true
		}
		runEnd = a.end
	}
	if inRun {
		closeRun(runEnd)
	}
	return failed, longest, at, slowest
}
