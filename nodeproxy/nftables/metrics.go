package nftables

import "github.com/prometheus/client_golang/prometheus"

// metricsPrefix is the iptables mode's (package netfilter): the names that mean the same are
// the same, so dashboards work for both modes.
const metricsPrefix = "portico_agent_"

type metrics struct {
	failures         prometheus.Counter
	objects          *prometheus.CounterVec
	noLocalEndpoints *prometheus.GaugeVec
	conntrackDeleted prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_nftables_sync_failures_total", Help: "Failed nftables transactions (each followed by a full sync)."}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_nftables_objects_written_total",
			Help: "Chains, rules and set elements written or deleted by nftables transactions, by family and sync kind (full, partial)."},
			[]string{"family", "sync"}),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_no_local_endpoints_total", Help: "Service ports with a Local traffic policy (label: external or internal) that have endpoints, none on this node."}, []string{"traffic_policy"}),
		conntrackDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "conntrack_stale_udp_entries_deleted_total", Help: "Stale UDP conntrack entries deleted after endpoint changes."}),
	}
	if reg != nil {
		reg.MustRegister(m.failures, m.objects, m.noLocalEndpoints, m.conntrackDeleted)
	}
	return m
}
