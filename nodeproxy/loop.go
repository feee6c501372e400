package nodeproxy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/portico-lb/portico/nodeproxy/healthcheck"
	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// Consumer is one room of the agent driven by the sync loop: the netfilter programmer, the
// health-check servers, and next the VIP announcers. On every sync each consumer is handed the
// same tracker.State; see the package doc for the contract.
type Consumer interface {
	// Name names the consumer in logs and errors.
	Name() string
	// Sync brings what the consumer owns up to date with st. An error makes the loop retry
	// with back-off, as a full sync for every consumer.
	Sync(ctx context.Context, st *tracker.State) error
}

var (
	_ Consumer = (*netfilter.Proxier)(nil)
	_ Consumer = (*healthcheck.Servers)(nil)
)

// syncKey is the single item of the sync queue: every change coalesces into one pending sync.
const syncKey = "sync"

// changeSource is what the loop needs of the tracker.
type changeSource interface {
	Take() (changed map[types.NamespacedName]bool, nodeChanged bool, triggers []tracker.Trigger)
	Restore(changed map[types.NamespacedName]bool)
}

// syncLoop takes the tracker's changes and hands them to every consumer, one sync at a time, at
// most one per the limiter's period; a failure puts the changes back and makes the next sync
// full.
type syncLoop struct {
	log     logr.Logger
	node    string
	changes changeSource
	store   tracker.Store
	// snapshot is what the consumers read: store's Services as of each sync's start (created
	// over store on the first sync).
	snapshot  *tracker.Snapshot
	consumers []Consumer
	// rules is the consumer among consumers that programs the rules (the proxy mode's
	// programmer): when it fails, the consumers after it get State.RulesFailed. Nil: none.
	rules   Consumer
	queue   workqueue.TypedRateLimitingInterface[string]
	limiter *rate.Limiter
	metrics *loopMetrics
	// synced is told about every successful sync (nil: nobody).
	synced func()
	// liveness returns the membership view for State.Alive and State.Dead (nil: no
	// membership).
	liveness func() (alive, dead map[string]bool)

	fullPending atomic.Bool
	// urgent lets the next sync skip the rate limiter (a membership change: failover time
	// counts).
	urgent atomic.Bool
}

func newSyncLoop(log logr.Logger, node string, minSyncPeriod time.Duration, m *loopMetrics) *syncLoop {
	limit := rate.Inf
	if minSyncPeriod > 0 {
		limit = rate.Every(minSyncPeriod)
	}
	return &syncLoop{
		log: log, node: node, metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "portico-agent-sync"}),
		limiter: rate.NewLimiter(limit, 1),
	}
}

// notify queues a sync (the tracker calls it on every change).
func (l *syncLoop) notify() {
	l.metrics.lastQueued.SetToCurrentTime()
	l.queue.Add(syncKey)
}

// requestFull queues a full sync (at start and every --sync-period).
func (l *syncLoop) requestFull() {
	l.fullPending.Store(true)
	l.queue.Add(syncKey)
}

// requestUrgent queues a sync that does not wait for the rate limiter: the membership view
// changed, and a failover should not wait up to --min-sync-period. Membership changes are rare
// (a node dies, leaves or joins), so this does not defeat the limiter. The sync is partial:
// the caller marks the Services whose rules the change affects (those with endpoints on the
// nodes concerned), and announcers recompute every VIP on every sync anyway, so that a
// failover does not wait for a full sync's rewrite (seconds at 10,000 Services).
func (l *syncLoop) requestUrgent() {
	l.urgent.Store(true)
	l.queue.Add(syncKey)
}

// processNext runs one sync from the queue, at most one per MinSyncPeriod. It reports false
// when the loop is shut down.
func (l *syncLoop) processNext(ctx context.Context) bool {
	key, shutdown := l.queue.Get()
	if shutdown {
		return false
	}
	defer l.queue.Done(key)
	if l.urgent.Swap(false) {
		if err := ctx.Err(); err != nil {
			return false
		}
	} else if err := l.limiter.Wait(ctx); err != nil {
		return false
	}
	if err := l.sync(ctx); err != nil {
		l.log.Error(err, "Sync failed; retrying with a full sync")
		l.metrics.fullFallbacks.Inc()
		l.fullPending.Store(true)
		l.queue.AddRateLimited(key)
		return true
	}
	l.queue.Forget(key)
	return true
}

// sync is one pass of the loop: take the pending changes, hand the state to every consumer (all
// of them, even after one failed: the rooms are independent, but after the rules programmer
// failed the state says so, State.RulesFailed, and announcers add nothing), and on any failure
// put the changes back for the next, full, sync.
func (l *syncLoop) sync(ctx context.Context) error {
	start := time.Now()
	full := l.fullPending.Swap(false)
	changed, nodeChanged, triggers := l.changes.Take()
	full = full || nodeChanged
	if l.snapshot == nil {
		l.snapshot = tracker.NewSnapshot(l.store)
	}
	// Every consumer reads the objects as they are now, not as they are when its turn comes:
	// an announcer must not announce what the netfilter programmer, run before it, did not see.
	if err := l.snapshot.Refresh(full, changed); err != nil {
		l.changes.Restore(changed)
		return err
	}
	st, err := tracker.NewState(l.snapshot, l.node, full, changed)
	if err != nil {
		l.changes.Restore(changed)
		return err
	}
	st.Triggers = triggers
	if l.liveness != nil {
		st.Alive, st.Dead = l.liveness()
	}
	var errs []error
	for _, c := range l.consumers {
		if err := c.Sync(ctx, st); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name(), err))
			// The announcers after it must not draw traffic for what the rules may lack.
			st.RulesFailed = st.RulesFailed || (l.rules != nil && c == l.rules)
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.changes.Restore(changed)
		return err
	}
	elapsed := time.Since(start).Seconds()
	l.metrics.syncDuration.Observe(elapsed)
	if full {
		l.metrics.fullDuration.Observe(elapsed)
	} else {
		l.metrics.partialDuration.Observe(elapsed)
	}
	l.metrics.lastSync.SetToCurrentTime()
	if l.synced != nil {
		l.synced()
	}
	l.log.V(1).Info("Synced", "full", full, "services", len(st.Changed), "seconds", elapsed)
	if full {
		// A full sync renders every Service and builds its whole netlink batch or restore
		// input at once: at 10,000 Services the heap grew to about twice its live size and
		// the runtime kept those pages (RSS 316 MB for 140 MB of heap). Full syncs come at
		// start, after failures and every --sync-period (30 s by default), so their garbage is
		// collected and returned to the system now, after the sync (its duration metric
		// excludes this), at the cost of one forced collection per full sync.
		gcStart := time.Now()
		debug.FreeOSMemory()
		l.log.V(1).Info("Returned the full sync's memory", "seconds", time.Since(gcStart).Seconds())
	}
	return nil
}
