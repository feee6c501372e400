package tracker

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ChangeMetricNames are the counts of changes a Tracker with Options.Registerer registers:
// under the agent's prefix and under kube-proxy's (whose dashboards read them), Service
// changes and EndpointSlice changes seen, counted as kube-proxy counts them: every add, update
// (a new version, not an informer's replay of the same one) and delete.
var ChangeMetricNames = []string{
	"portico_agent_sync_proxy_rules_service_changes_total",
	"kubeproxy_sync_proxy_rules_service_changes_total",
	"portico_agent_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
}

// changeMetrics count the changes the tracker sees; a nil *changeMetrics counts nothing.
type changeMetrics struct {
	services, slices []prometheus.Counter
}

func newChangeMetrics(reg prometheus.Registerer) *changeMetrics {
	if reg == nil {
		return nil
	}
	m := &changeMetrics{}
	for i, name := range ChangeMetricNames {
		help := "Service changes seen (added, updated, deleted)."
		if i >= 2 {
			help = "EndpointSlice changes seen (added, updated, deleted)."
		}
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		if i < 2 {
			m.services = append(m.services, c)
		} else {
			m.slices = append(m.slices, c)
		}
	}
	return m
}

func (m *changeMetrics) serviceChanged() {
	if m != nil {
		for _, c := range m.services {
			c.Inc()
		}
	}
}

func (m *changeMetrics) sliceChanged() {
	if m != nil {
		for _, c := range m.slices {
			c.Inc()
		}
	}
}
