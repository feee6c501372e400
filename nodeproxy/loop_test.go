package nodeproxy

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/netfilter/netfiltertest"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// loopFixture is the sync loop over a tracker without informers, the real netfilter
// programmer over the fake netfilter seam, and a recording consumer.
type loopFixture struct {
	store    *tracker.CacheStore
	loop     *syncLoop
	tracker  *tracker.Tracker
	fake     *netfiltertest.Fake
	services cache.Indexer
	slices   cache.Indexer
	rec      *recorder
}

// recorder is a consumer that records the states it is given and fails on demand.
type recorder struct {
	states []*tracker.State
	fail   error
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Sync(_ context.Context, st *tracker.State) error {
	r.states = append(r.states, st)
	return r.fail
}

func newLoopFixture(t *testing.T) *loopFixture {
	f := &loopFixture{
		fake:     netfiltertest.New(),
		services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey}),
		rec:      &recorder{},
	}
	store := tracker.NewCacheStore("node1", f.services, f.slices, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	f.loop = newSyncLoop(logr.Discard(), "node1", 0, newLoopMetrics(nil))
	f.tracker = tracker.NewForStore(store, f.loop.notify)
	f.loop.changes, f.loop.store, f.store = f.tracker, store, store
	proxier := netfilter.New(netfilter.Options{MasqueradeBit: 12, Netfilters: map[rules.Family]netfilter.Netfilter{rules.IPv4: f.fake}})
	f.loop.consumers = []Consumer{proxier, f.rec}
	f.loop.rules = proxier
	t.Cleanup(f.loop.queue.ShutDown)
	return f
}

// service stores (or updates) a Service at 198.18.0.10 with one endpoint at ep, and marks it.
func (f *loopFixture) service(name, ep string) types.NamespacedName {
	_ = f.services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.10", ClusterIPs: []string{"198.18.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
	_ = f.slices.Update(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ep}}},
	})
	key := types.NamespacedName{Namespace: "ns", Name: name}
	f.tracker.Mark(key)
	return key
}

func (f *loopFixture) bucket() string {
	rs, _ := f.fake.Chain(rules.TableNAT, "PTC-SVC-0A")
	return strings.Join(rs, "\n")
}

// TestSyncLoopFullThenPartial: the first sync is full (every Service, the kernel read); later
// changes are partial (the changed Services only, nothing read).
func TestSyncLoopFullThenPartial(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	f.service("web", "198.19.1.2")
	f.service("db", "198.19.1.3")
	f.loop.requestFull()
	if !f.loop.processNext(ctx) {
		t.Fatal("loop shut down")
	}
	st := f.rec.states[0]
	if !st.Full || len(st.Changed) != 2 {
		t.Fatalf("first sync: full=%v changed=%v, want full over both Services", st.Full, st.Changed)
	}
	if _, saves := f.fake.Calls(); saves != 1 {
		t.Errorf("first sync read the kernel %d times, want 1", saves)
	}

	web := f.service("web", "198.19.1.9")
	if !f.loop.processNext(ctx) {
		t.Fatal("loop shut down")
	}
	st = f.rec.states[1]
	if st.Full || len(st.Changed) != 1 || st.Changed[0] != web {
		t.Errorf("second sync: full=%v changed=%v, want partial over web", st.Full, st.Changed)
	}
	if _, saves := f.fake.Calls(); saves != 1 {
		t.Errorf("a partial sync read the kernel (saves %d)", saves)
	}
	if !strings.Contains(f.bucket(), "198.19.1.9:8080") {
		t.Errorf("bucket %q lacks the new endpoint", f.bucket())
	}
}

// TestSyncLoopRestoreFailure: a failed restore puts the pending changes back into the tracker
// and the next sync is full, which programs them.
func TestSyncLoopRestoreFailure(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	f.service("web", "198.19.1.2")
	f.loop.requestFull()
	f.loop.processNext(ctx)

	web := f.service("web", "198.19.1.9")
	f.fake.FailRestores = 1
	f.loop.processNext(ctx) // fails; re-queued with back-off
	if pending := f.tracker.Pending(); !pending[web] {
		t.Errorf("pending changes after a failed sync: %v, want web put back", pending)
	}
	if !f.loop.fullPending.Load() {
		t.Error("a failed sync did not ask for a full sync")
	}
	if n := testutil.ToFloat64(f.loop.metrics.fullFallbacks); n != 1 {
		t.Errorf("sync_proxy_rules_full_fallbacks_total = %v after one failed sync, want 1", n)
	}
	if len(f.rec.states) != 2 {
		t.Errorf("the other consumers were not run on the failed sync: %d syncs recorded", len(f.rec.states))
	}

	_, saves := f.fake.Calls()
	if err := f.loop.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.rec.states[len(f.rec.states)-1]; !st.Full {
		t.Error("the sync after a failure was not full")
	}
	if _, s := f.fake.Calls(); s != saves+1 {
		t.Errorf("the full sync did not read the kernel: saves %d -> %d", saves, s)
	}
	if !strings.Contains(f.bucket(), "198.19.1.9:8080") {
		t.Errorf("bucket %q lacks the change of the failed sync", f.bucket())
	}
	if pending := f.tracker.Pending(); len(pending) != 0 {
		t.Errorf("changes still pending after a successful sync: %v", pending)
	}
}

// TestSyncLoopConsumerFailure: any consumer's failure (an announcer's, say) is retried like the
// netfilter programmer's, as a full sync, and names the consumer.
func TestSyncLoopConsumerFailure(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	web := f.service("web", "198.19.1.2")
	f.rec.fail = errors.New("announce failed")
	err := f.loop.sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "recorder: announce failed") {
		t.Fatalf("sync error %v, want the consumer's, named", err)
	}
	if !f.tracker.Pending()[web] {
		t.Error("changes not put back after a consumer failed")
	}
	f.rec.fail = nil
	f.loop.requestFull()
	f.loop.processNext(ctx)
	if st := f.rec.states[len(f.rec.states)-1]; !st.Full || len(st.Changed) != 1 {
		t.Errorf("retry: full=%v changed=%v", st.Full, st.Changed)
	}
}

// TestMembershipChangeSkipsLimiterAndDropsDeadEndpoints: a membership change (the Services with
// endpoints on the node marked, then requestUrgent) syncs at once despite --min-sync-period, as
// a partial sync over those Services that hands the view to every consumer, and netfilter
// leaves the dead node's endpoint out; an ordinary change still waits.
func TestMembershipChangeSkipsLimiterAndDropsDeadEndpoints(t *testing.T) {
	f := newLoopFixture(t)
	f.loop.limiter = rate.NewLimiter(rate.Every(time.Hour), 1)
	dead := map[string]bool{}
	f.loop.liveness = func() (map[string]bool, map[string]bool) {
		return map[string]bool{"node1": true, "node2": !dead["node2"]}, maps.Clone(dead)
	}
	_ = f.services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.10", ClusterIPs: []string{"198.18.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	port, portName, proto, n1, n2 := int32(8080), "http", corev1.ProtocolTCP, "node1", "node2"
	_ = f.slices.Update(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.19.1.2"}, NodeName: &n1},
			{Addresses: []string{"198.19.2.2"}, NodeName: &n2}},
	})
	f.tracker.Mark(types.NamespacedName{Namespace: "ns", Name: "web"})
	f.loop.requestFull()
	if !f.loop.processNext(context.Background()) {
		t.Fatal("loop shut down")
	}
	if !strings.Contains(f.bucket(), "198.19.2.2:8080") {
		t.Fatalf("node2's endpoint missing while node2 is alive:\n%s", f.bucket())
	}

	dead["node2"] = true
	marked := f.store.ServicesWithEndpointsOn(map[string]bool{"node2": true})
	if len(marked) != 1 || marked[0].Name != "web" {
		t.Fatalf("services with endpoints on node2 = %v, want web", marked)
	}
	f.loop.urgent.Store(true)
	f.tracker.Mark(marked[0])
	f.loop.requestUrgent()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !f.loop.processNext(ctx) {
		t.Fatal("the membership change waited for the rate limiter")
	}
	st := f.rec.states[len(f.rec.states)-1]
	if st.Full || len(st.Changed) != 1 || !st.Dead["node2"] || st.Alive["node2"] {
		t.Errorf("sync after the change: full=%v changed=%v alive=%v dead=%v, want a partial sync of web with node2 dead", st.Full, st.Changed, st.Alive, st.Dead)
	}
	if b := f.bucket(); strings.Contains(b, "198.19.2.2:8080") || !strings.Contains(b, "198.19.1.2:8080") {
		t.Errorf("rules after node2 died, want node1's endpoint only:\n%s", b)
	}

	f.service("db", "198.19.1.3")
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if f.loop.processNext(short) {
		t.Error("an ordinary change did not wait for the rate limiter")
	}
}

// consumerFunc is a Consumer from a function.
type consumerFunc func(st *tracker.State) error

func (consumerFunc) Name() string                                      { return "func" }
func (c consumerFunc) Sync(_ context.Context, st *tracker.State) error { return c(st) }

// TestSyncLoopOneStatePerSync: objects that change while a sync runs (an informer update after
// the netfilter programmer rendered) reach no consumer of that sync, so an announcer never acts
// on what the rules lack; the next sync hands them to every consumer.
func TestSyncLoopOneStatePerSync(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	f.service("web", "198.19.1.2")
	f.loop.requestFull()
	f.loop.processNext(ctx)

	f.service("web", "198.19.1.3")
	var late types.NamespacedName
	updateMidSync := consumerFunc(func(*tracker.State) error {
		f.service("web", "198.19.1.4") // the informer's next update, during this sync
		late = f.service("api", "198.19.1.5")
		return nil
	})
	var seen []string
	var keys []types.NamespacedName
	announcer := consumerFunc(func(st *tracker.State) error {
		_, eps, err := st.Service(types.NamespacedName{Namespace: "ns", Name: "web"})
		if err != nil {
			return err
		}
		for _, s := range eps {
			for _, e := range s.Endpoints {
				seen = append(seen, e.Addresses...)
			}
		}
		keys, err = st.Store.Services()
		return err
	})
	f.loop.consumers = []Consumer{f.loop.consumers[0], updateMidSync, announcer}
	f.loop.processNext(ctx)
	if !strings.Contains(f.bucket(), "198.19.1.3:8080") {
		t.Fatalf("bucket %q: the programmer did not render the sync's endpoint", f.bucket())
	}
	if len(seen) != 1 || seen[0] != "198.19.1.3" {
		t.Errorf("the announcer saw web's endpoints %v in the sync that programmed 198.19.1.3", seen)
	}
	if slices.Contains(keys, late) {
		t.Errorf("the announcer listed %v, created after the sync began: %v", late, keys)
	}

	f.loop.consumers = []Consumer{f.loop.consumers[0], announcer}
	seen = nil
	f.loop.processNext(ctx)
	if !strings.Contains(f.bucket(), "198.19.1.4:8080") || len(seen) != 1 || seen[0] != "198.19.1.4" {
		t.Errorf("next sync: bucket %q, announcer saw %v; want both at 198.19.1.4", f.bucket(), seen)
	}
	if !slices.Contains(keys, late) {
		t.Errorf("next sync: the announcer's keys %v lack %v", keys, late)
	}
}

// TestSyncLoopRulesFailedReachesAnnouncers: when the rules programmer fails, the consumers
// after it (the announcers) are told (State.RulesFailed), so that a VIP new in that sync is not
// announced without its rules; another consumer's failure does not set it, nor does a
// successful sync.
func TestSyncLoopRulesFailedReachesAnnouncers(t *testing.T) {
	ctx := context.Background()
	f := newLoopFixture(t)
	f.service("web", "198.19.1.2")
	if err := f.loop.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if f.rec.states[0].RulesFailed {
		t.Error("a successful sync says the rules failed")
	}

	f.service("api", "198.19.1.3")
	f.fake.FailRestores = 1
	if err := f.loop.sync(ctx); err == nil {
		t.Fatal("the sync did not fail")
	}
	if !f.rec.states[1].RulesFailed {
		t.Error("the consumer after the failed rules programmer was not told")
	}

	f.rec.fail = errors.New("announce failed")
	_ = f.loop.sync(ctx)
	if f.rec.states[2].RulesFailed {
		t.Error("a sync whose rules were programmed says they failed (only another consumer failed)")
	}
}
