package nftables

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
)

// metricsPrefix is the iptables mode's (package netfilter): the names that mean the same are
// the same, so dashboards work for both modes.
const metricsPrefix = "portico_agent_"

type metrics struct {
	failures prometheus.Counter
	objects  *prometheus.CounterVec
	family   *netfilter.FamilyMetrics // the metrics both modes keep
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_nftables_sync_failures_total", Help: "Failed nftables transactions (each followed by a full sync)."}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "sync_proxy_rules_nftables_objects_written_total",
			Help: "Chains, rules and set elements written or deleted by nftables transactions, by family and sync kind (full, partial)."},
			[]string{"family", "sync"}),
		family: netfilter.NewFamilyMetrics(),
	}
	if reg != nil {
		reg.MustRegister(append(m.family.Collectors(), m.failures, m.objects)...)
	}
	return m
}
