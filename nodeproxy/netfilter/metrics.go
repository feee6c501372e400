package netfilter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsPrefix replaces kube-proxy's "kubeproxy_" so both can run on one node; the rest of
// every name is kube-proxy's, so dashboards carry over by changing the prefix.
const metricsPrefix = "portico_agent_"

// Metrics are the netfilter programmer's Prometheus metrics.
type Metrics struct {
	restoreFailures, partialRestoreFailures prometheus.Counter
	rules                                   *prometheus.GaugeVec
	family                                  *FamilyMetrics // the metrics both modes keep
	chainsRestored                          *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		restoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_restore_failures_total", Help: "Failed iptables-restore runs."}),
		partialRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Failed partial iptables-restore runs (followed by a full sync)."}),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_iptables_total", Help: "Rules in the owned chains after the last sync, by family and table."}, []string{"family", "table"}),
		family: NewFamilyMetrics(),
		chainsRestored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_chains_restored_total",
			Help: "Chains written or deleted by iptables-restore, by family and sync kind (full, partial). A full sync without drift writes none."},
			[]string{"family", "sync"}),
	}
	if reg != nil {
		reg.MustRegister(append(m.family.Collectors(), m.restoreFailures, m.partialRestoreFailures, m.rules, m.chainsRestored)...)
	}
	return m
}
