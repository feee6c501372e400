package service

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/portico-lb/portico/providers"
)

// Metrics are the controller's own Prometheus metrics. Reconcile counts, errors and durations
// come from controller-runtime (controller_runtime_reconcile_total, _errors_total, _time_seconds,
// labelled controller="portico-service").
type Metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_provider_calls_total",
			Help: "Provider calls by provider, operation (ensure, delete) and outcome (success, invalid, retry, error).",
		}, []string{"provider", "operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portico_provider_call_duration_seconds",
			Help:    "Duration of provider calls by provider and operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"provider", "operation"}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.duration)
	}
	return m
}

// ProcessMetrics returns the metrics registered once per process in controller-runtime's
// registry (which /metrics serves); every reconciler in the process shares them.
var ProcessMetrics = sync.OnceValue(func() *Metrics { return NewMetrics(crmetrics.Registry) })

func (m *Metrics) observeCall(provider, op string, start time.Time, err error) {
	m.duration.WithLabelValues(provider, op).Observe(time.Since(start).Seconds())
	m.calls.WithLabelValues(provider, op, outcome(err)).Inc()
}

func outcome(err error) string {
	var retry *providers.RetryError
	switch {
	case err == nil:
		return "success"
	case providers.IsInvalid(err):
		return "invalid"
	case errors.As(err, &retry):
		return "retry"
	default:
		return "error"
	}
}
