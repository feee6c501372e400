package healthcheck

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// NewProxyHealth returns the agent's own health: unhealthy once a change has waited longer than
// timeout (pending is when the oldest unsynced change arrived) or one family's syncs have failed
// for that long; /healthz also needs eligible (the node is known and not being deleted). Its
// metrics are registered with reg (nil: not registered).
func NewProxyHealth(timeout time.Duration, pending func() time.Time, eligible func() bool, reg prometheus.Registerer) *ProxyHealth {
	h := &ProxyHealth{timeout: timeout, pending: pending, eligible: eligible,
		healthz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "proxy_healthz_total", Help: "/healthz answers by code."}, []string{"code"}),
		livez: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "proxy_livez_total", Help: "/livez answers by code."}, []string{"code"}),
		readyz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "proxy_readyz_total", Help: "/readyz answers by code."}, []string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(h.healthz, h.livez, h.readyz)
	}
	return h
}

// metricsPrefix is kube-proxy's metric prefix with portico_agent_ for kubeproxy_.
const metricsPrefix = "portico_agent_"

// ProxyHealth answers /healthz and /livez for the agent itself.
type ProxyHealth struct {
	timeout        time.Duration
	pending        func() time.Time // oldest unsynced change, zero when none
	eligible       func() bool      // the node is not being deleted
	healthz, livez *prometheus.CounterVec
	readyz         *prometheus.CounterVec

	lastUpdated atomic.Int64 // unix nanoseconds of the last successful sync (MarkSynced)
	// cachesSynced is when the informer caches synced (CachesSynced; 0: not yet): a change
	// that waits for a sync counts from then at the earliest.
	cachesSynced atomic.Int64

	mu       sync.Mutex
	families map[rules.Family]*familyHealth
}

// familyHealth is one IP family's sync record.
type familyHealth struct {
	lastUpdated time.Time // last successful sync of the family
	failing     time.Time // first failure since then; zero when the last sync succeeded
}

// FamilySynced records the outcome of one family's part of a sync.
func (h *ProxyHealth) FamilySynced(f rules.Family, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.families == nil {
		h.families = map[rules.Family]*familyHealth{}
	}
	fh := h.families[f]
	if fh == nil {
		fh = &familyHealth{}
		h.families[f] = fh
	}
	now := time.Now()
	switch {
	case err == nil:
		fh.lastUpdated, fh.failing = now, time.Time{}
	case fh.failing.IsZero():
		fh.failing = now
	}
}

// ForgetFamily drops family f's record: the agent no longer programs it (its Node lost every
// address of it), so its past failures no longer count and /healthz no longer lists it.
func (h *ProxyHealth) ForgetFamily(f rules.Family) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.families, f)
}

// familyStatus reports each family's health: a family is unhealthy once its syncs have been
// failing for longer than the timeout.
func (h *ProxyHealth) familyStatus() (map[string]any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]any{}
	all := true
	for f, fh := range h.families {
		ok := fh.failing.IsZero() || time.Since(fh.failing) < h.timeout
		all = all && ok
		out[f.String()] = map[string]any{"healthy": ok, "lastUpdated": fh.lastUpdated}
	}
	return out, all
}

// Healthy is false when a change has waited longer than the timeout for a successful sync, or
// when one family's syncs have been failing that long. Before the caches synced (CachesSynced)
// no change waits for a sync: the agent is waiting for the API server, which a restart would
// not make faster (kube-proxy counts from its initialization too).
func (h *ProxyHealth) Healthy() bool {
	since := h.pending()
	synced := h.cachesSynced.Load()
	if synced == 0 {
		since = time.Time{}
	} else if s := time.Unix(0, synced); since.Before(s) && !since.IsZero() {
		since = s
	}
	if !since.IsZero() && time.Since(since) >= h.timeout {
		return false
	}
	_, ok := h.familyStatus()
	return ok
}

// CachesSynced records that the informer caches have synced: from now on a change that waits
// for a sync counts against the timeout.
func (h *ProxyHealth) CachesSynced() { h.cachesSynced.CompareAndSwap(0, time.Now().UnixNano()) }

// Synced reports whether a sync has succeeded (the first, full one included).
func (h *ProxyHealth) Synced() bool { return h.lastUpdated.Load() != 0 }

// Probe is what a Handler answers.
type Probe int

const (
	// Livez (liveness) is Healthy alone: 200 from the agent's start, before the API server
	// answers, until changes wait too long for a sync.
	Livez Probe = iota
	// Readyz (readiness) also needs the first sync done.
	Readyz
	// Healthz (what load balancers probe) also needs the first sync done and the node
	// eligible.
	Healthz
)

// Handler answers p (/livez, /readyz or /healthz) with a JSON body and 200 or 503.
func (h *ProxyHealth) Handler(p Probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		healthy := h.Healthy()
		now := time.Now()
		last := time.Unix(0, h.lastUpdated.Load())
		if healthy {
			last = now // as kube-proxy: healthy answers report "now"
		}
		families, _ := h.familyStatus()
		body := map[string]any{"lastUpdated": last, "currentTime": now, "healthy": healthy, "families": families}
		ok := healthy
		counter := h.livez
		if p != Livez {
			synced := h.Synced()
			body["synced"] = synced
			ok = ok && synced
			counter = h.readyz
		}
		if p == Healthz {
			eligible := h.eligible()
			body["nodeEligible"] = eligible
			ok = ok && eligible
			counter = h.healthz
		}
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		counter.WithLabelValues(strconv.Itoa(code)).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// MarkSynced records a successful sync of every consumer.
func (h *ProxyHealth) MarkSynced() { h.lastUpdated.Store(time.Now().UnixNano()) }
