package nodeproxy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// TestProgrammingLatencyObservedOncePerSuccessfulSync: the netfilter programmer observes each
// slice change's trigger once, after the restore that programmed it, with the time since the
// trigger; a failed restore observes nothing, and its retry does not measure the failure.
func TestProgrammingLatencyObservedOncePerSuccessfulSync(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	reg := prometheus.NewRegistry()
	f.loop.consumers[0] = netfilter.New(netfilter.Options{MasqueradeBit: 12,
		Netfilters: map[rules.Family]netfilter.Netfilter{rules.IPv4: f.fake}, Latency: tracker.NewProgrammingLatency(reg)})
	count := func() int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "portico_agent_network_programming_duration_seconds")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return 0
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		return int(agentLatency(t, mfs).Metric[0].GetHistogram().GetSampleCount())
	}
	// The trigger times are now: the tracker measures no change made before it started.
	change := func(ep string) {
		f.service("web", ep)
		objs, _ := f.slices.ByIndex(tracker.SliceServiceIndex, "ns/web")
		s := objs[0].(*discoveryv1.EndpointSlice).DeepCopy()
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
		_ = f.slices.Update(s)
		f.tracker.SliceChanged(nil, s, false)
	}

	f.loop.requestFull()
	f.loop.processNext(ctx)
	start := time.Now()
	change("198.19.1.2")
	if err := f.loop.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 1 {
		t.Fatalf("observations after one change = %d, want 1", got)
	}
	mfs, _ := reg.Gather()
	h := agentLatency(t, mfs).Metric[0]
	if l := h.GetLabel(); len(l) != 1 || l[0].GetValue() != "IPv4" {
		t.Errorf("labels %v, want ip_family=IPv4", l)
	}
	if s := h.GetHistogram().GetSampleSum(); s <= 0 || s > time.Since(start).Seconds() {
		t.Errorf("observed %.6f s, want the time from the change to the end of its sync (0 < s <= %.6f)", s, time.Since(start).Seconds())
	}

	change("198.19.1.3")
	f.fake.FailRestores = 1
	if err := f.loop.sync(ctx); err == nil {
		t.Fatal("sync did not fail")
	}
	if err := f.loop.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 1 {
		t.Errorf("observations after a failed sync and its retry = %d, want still 1", got)
	}
	if err := f.loop.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 1 {
		t.Errorf("a sync without changes observed: %d", got)
	}
}

// agentLatency is the agent's own network programming histogram among mfs (kube-proxy's name,
// without the family label, is gathered beside it).
func agentLatency(t *testing.T, mfs []*dto.MetricFamily) *dto.MetricFamily {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() == "portico_agent_network_programming_duration_seconds" {
			return mf
		}
	}
	t.Fatal("no portico_agent_network_programming_duration_seconds")
	return nil
}
