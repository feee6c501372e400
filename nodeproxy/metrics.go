package nodeproxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsPrefix replaces kube-proxy's "kubeproxy_" so both can run on one node; the rest of
// every name is kube-proxy's, so dashboards carry over by changing the prefix.
const metricsPrefix = "portico_agent_"

// metrics are the agent's Prometheus metrics.
type metrics struct {
	syncDuration, fullDuration, partialDuration prometheus.Histogram
	lastSync, lastQueued                        prometheus.Gauge
	restoreFailures, partialRestoreFailures     prometheus.Counter
	rules                                       *prometheus.GaugeVec
	noLocalEndpoints                            *prometheus.GaugeVec
	conntrackDeleted                            prometheus.Counter
	chainsRestored                              *prometheus.CounterVec
	healthz, livez                              *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &metrics{
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
		restoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_restore_failures_total", Help: "Failed iptables-restore runs."}),
		partialRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Failed partial iptables-restore runs (followed by a full sync)."}),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_total", Help: "Rules in the owned chains after the last sync, by family and table."}, []string{"family", "table"}),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_no_local_endpoints_total", Help: "Service ports with a Local traffic policy (label: external or internal) that have endpoints, none on this node."}, []string{"traffic_policy"}),
		conntrackDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "conntrack_stale_udp_entries_deleted_total", Help: "Stale UDP conntrack entries deleted after endpoint changes."}),
		chainsRestored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_chains_restored_total",
			Help: "Chains written or deleted by iptables-restore, by family and sync kind (full, partial). A full sync without drift writes none."},
			[]string{"family", "sync"}),
		healthz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "proxy_healthz_total", Help: "/healthz answers by code."}, []string{"code"}),
		livez: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "proxy_livez_total", Help: "/livez answers by code."}, []string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(m.syncDuration, m.fullDuration, m.partialDuration, m.lastSync, m.lastQueued,
			m.restoreFailures, m.partialRestoreFailures, m.rules, m.noLocalEndpoints, m.conntrackDeleted, m.chainsRestored, m.healthz, m.livez)
	}
	return m
}
