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
	}
	if reg != nil {
		reg.MustRegister(h.healthz, h.livez)
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

	lastUpdated atomic.Int64 // unix nanoseconds of the last successful sync (MarkSynced)

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
// when one family's syncs have been failing that long.
func (h *ProxyHealth) Healthy() bool {
	since := h.pending()
	if !since.IsZero() && time.Since(since) >= h.timeout {
		return false
	}
	_, ok := h.familyStatus()
	return ok
}

// Handler answers /healthz (withNode: the node must be eligible too) or /livez with a JSON
// body and 200 or 503.
func (h *ProxyHealth) Handler(withNode bool) http.Handler {
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
		if withNode {
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
