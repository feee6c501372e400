package nodeproxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsPrefix replaces kube-proxy's "kubeproxy_" so both can run on one node; the rest of
// every name is kube-proxy's, so dashboards carry over by changing the prefix. The netfilter
// and healthcheck packages register their own metrics with the same prefix.
const metricsPrefix = "portico_agent_"

// kubeProxyPrefix is kube-proxy's own prefix. The measurements kube-proxy makes are exported
// under its names too (KubeProxyMetricNames), alongside the agent's, so that the dashboards
// and alerts written for kube-proxy keep working once the agent replaces it.
const kubeProxyPrefix = "kubeproxy_"

// KubeProxyMetricNames are the kube-proxy metrics the agent exports under kube-proxy's names,
// each the same measurement as its portico_agent_ twin (docs/metrics.md).
var KubeProxyMetricNames = []string{
	kubeProxyPrefix + "sync_proxy_rules_duration_seconds",
	kubeProxyPrefix + "sync_full_proxy_rules_duration_seconds",
	kubeProxyPrefix + "sync_partial_proxy_rules_duration_seconds",
	kubeProxyPrefix + "sync_proxy_rules_last_timestamp_seconds",
	kubeProxyPrefix + "sync_proxy_rules_last_queued_timestamp_seconds",
	kubeProxyPrefix + "network_programming_duration_seconds",
	kubeProxyPrefix + "sync_proxy_rules_endpoint_changes_total",
	kubeProxyPrefix + "sync_proxy_rules_service_changes_total",
}

// histograms observe one measurement in each of a metric's names.
type histograms []prometheus.Histogram

func (hs histograms) Observe(v float64) {
	for _, h := range hs {
		h.Observe(v)
	}
}

// gauges set one measurement in each of a metric's names.
type gauges []prometheus.Gauge

func (gs gauges) SetToCurrentTime() {
	for _, g := range gs {
		g.SetToCurrentTime()
	}
}

// loopMetrics are the sync loop's Prometheus metrics, each under the agent's name and, where
// kube-proxy makes the same measurement, under kube-proxy's.
type loopMetrics struct {
	syncDuration, fullDuration, partialDuration histograms
	lastSync, lastQueued                        gauges
	// fullFallbacks counts the failed syncs, each answered by a full sync (not kube-proxy's:
	// its per-mode failure counters, which the modes keep too, are the nearest).
	fullFallbacks prometheus.Counter
}

// syncDurationBuckets are kube-proxy's for its sync durations: 1 ms to about 16 s, doubling.
func syncDurationBuckets() []float64 { return prometheus.ExponentialBuckets(0.001, 2, 15) }

func newLoopMetrics(reg prometheus.Registerer) *loopMetrics {
	var all []prometheus.Collector
	// Each name is written out whole: the chart's alert test finds the names in the source.
	histogram := func(help string, names ...string) histograms {
		var hs histograms
		for _, name := range names {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: syncDurationBuckets()})
			hs, all = append(hs, h), append(all, h)
		}
		return hs
	}
	gauge := func(help string, names ...string) gauges {
		var gs gauges
		for _, name := range names {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
			gs, all = append(gs, g), append(all, g)
		}
		return gs
	}
	m := &loopMetrics{
		syncDuration: histogram("Duration of syncs, full and partial.",
			metricsPrefix+"sync_proxy_rules_duration_seconds", kubeProxyPrefix+"sync_proxy_rules_duration_seconds"),
		fullDuration: histogram("Duration of full syncs (every owned chain rewritten).",
			metricsPrefix+"sync_full_proxy_rules_duration_seconds", kubeProxyPrefix+"sync_full_proxy_rules_duration_seconds"),
		partialDuration: histogram("Duration of partial syncs (changed chains only).",
			metricsPrefix+"sync_partial_proxy_rules_duration_seconds", kubeProxyPrefix+"sync_partial_proxy_rules_duration_seconds"),
		lastSync: gauge("Unix time of the last successful sync.",
			metricsPrefix+"sync_proxy_rules_last_timestamp_seconds", kubeProxyPrefix+"sync_proxy_rules_last_timestamp_seconds"),
		lastQueued: gauge("Unix time of the last change queued for a sync.",
			metricsPrefix+"sync_proxy_rules_last_queued_timestamp_seconds", kubeProxyPrefix+"sync_proxy_rules_last_queued_timestamp_seconds"),
		fullFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_full_fallbacks_total",
			Help: "Failed syncs (a refused nftables transaction or iptables-restore, an error of any consumer), each followed by a full sync in its place."}),
	}
	if reg != nil {
		reg.MustRegister(append(all, m.fullFallbacks)...)
	}
	return m
}
