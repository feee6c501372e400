package nodeproxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsPrefix replaces kube-proxy's "kubeproxy_" so both can run on one node; the rest of
// every name is kube-proxy's, so dashboards carry over by changing the prefix. The netfilter
// and healthcheck packages register their own metrics with the same prefix.
const metricsPrefix = "portico_agent_"

// loopMetrics are the sync loop's Prometheus metrics.
type loopMetrics struct {
	syncDuration, fullDuration, partialDuration prometheus.Histogram
	lastSync, lastQueued                        prometheus.Gauge
	// fullFallbacks counts the failed syncs, each answered by a full sync (not kube-proxy's:
	// its per-mode failure counters, which the modes keep too, are the nearest).
	fullFallbacks prometheus.Counter
}

func newLoopMetrics(reg prometheus.Registerer) *loopMetrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &loopMetrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metricsPrefix + "sync_proxy_rules_duration_seconds", Help: "Duration of syncs, full and partial.", Buckets: buckets}),
		fullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metricsPrefix + "sync_full_proxy_rules_duration_seconds", Help: "Duration of full syncs (every owned chain rewritten).", Buckets: buckets}),
		partialDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metricsPrefix + "sync_partial_proxy_rules_duration_seconds", Help: "Duration of partial syncs (changed chains only).", Buckets: buckets}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_last_timestamp_seconds", Help: "Unix time of the last successful sync."}),
		lastQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_last_queued_timestamp_seconds", Help: "Unix time of the last change queued for a sync."}),
		fullFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_full_fallbacks_total",
			Help: "Failed syncs (a refused nftables transaction or iptables-restore, an error of any consumer), each followed by a full sync in its place."}),
	}
	if reg != nil {
		reg.MustRegister(m.syncDuration, m.fullDuration, m.partialDuration, m.lastSync, m.lastQueued, m.fullFallbacks)
	}
	return m
}
