package nodeproxy

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// TestKubeProxyMetricNames: the agent's sync loop, tracker and proxiers register kube-proxy's
// names beside their own, each with kube-proxy's buckets and the same buckets as its twin.
func TestKubeProxyMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	newLoopMetrics(reg)
	if _, err := tracker.New(fake.NewClientset(), "node1", func() {}, tracker.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	tracker.NewProgrammingLatency(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	buckets := map[string][]float64{}
	for _, f := range families {
		var b []float64
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				for _, bk := range h.GetBucket() {
					b = append(b, bk.GetUpperBound())
				}
			}
		}
		buckets[f.GetName()] = b
	}
	sync := []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384}
	for _, name := range KubeProxyMetricNames {
		b, ok := buckets[name]
		if !ok {
			t.Errorf("%s not registered", name)
			continue
		}
		// The agent's network programming histogram has a family label: it shows once
		// observed (e2e/suites/operations TestKubeProxyMetricNames compares the counts).
		if twin := "portico_agent_" + name[len("kubeproxy_"):]; name != "kubeproxy_network_programming_duration_seconds" {
			if tb, ok := buckets[twin]; !ok {
				t.Errorf("%s registered without its twin %s", name, twin)
			} else if !slices.Equal(b, tb) {
				t.Errorf("%s buckets %v, %s %v", name, b, twin, tb)
			}
		}
		switch name {
		case "kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_sync_full_proxy_rules_duration_seconds", "kubeproxy_sync_partial_proxy_rules_duration_seconds":
			if !slices.Equal(b, sync) {
				t.Errorf("%s buckets %v, want kube-proxy's %v", name, b, sync)
			}
		case "kubeproxy_network_programming_duration_seconds":
			if !slices.Equal(b, tracker.ProgrammingLatencyBuckets()) {
				t.Errorf("%s buckets %v, want kube-proxy's %v", name, b, tracker.ProgrammingLatencyBuckets())
			}
		}
	}
}
