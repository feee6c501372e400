package l2

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/nodeproxy/announce"
	"github.com/portico-lb/portico/nodeproxy/announce/election"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// fakeSetter records the last Set.
type fakeSetter struct {
	set          []VIP
	reannounced  int
	setCallCount int
}

func (f *fakeSetter) Set(vips ...VIP) error {
	f.set, f.setCallCount = vips, f.setCallCount+1
	return nil
}
func (f *fakeSetter) Reannounce() { f.reannounced++ }

func (f *fakeSetter) addrs() []string {
	var out []string
	for _, v := range f.set {
		out = append(out, v.Addr.String()+"@"+strings.Join(v.Interfaces, "+"))
	}
	return out
}

type world struct {
	t                          *testing.T
	svcs, slices, nodes, pools cache.Indexer
}

func newWorld(t *testing.T) *world {
	return &world{t: t,
		svcs:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		slices: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey}),
		nodes:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pools:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
}

func (w *world) node(name string, labels map[string]string) {
	if err := w.nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) pool(name string, l2 *v1alpha1.L2Announce, addrs ...string) {
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{Addresses: addrs, Announce: v1alpha1.Announce{L2: l2}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.pools.Add(&unstructured.Unstructured{Object: u}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) service(name string, local bool, vips []string, endpointNodes ...string) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	if local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	for _, v := range vips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: v})
	}
	if err := w.svcs.Add(svc); err != nil {
		w.t.Fatal(err)
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, n := range endpointNodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"198.19.1.1"}, NodeName: &n})
	}
	if err := w.slices.Add(s); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) state(me string, alive ...string) *tracker.State {
	store := tracker.NewCacheStore(me, w.svcs, w.slices, w.nodes).WithPools(w.pools)
	st, err := tracker.NewState(store, me, true, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if alive != nil {
		st.Alive = map[string]bool{}
		for _, a := range alive {
			st.Alive[a] = true
		}
	}
	return st
}

func newTestConsumer(rec events.EventRecorder, reg prometheus.Registerer) (*Consumer, *fakeSetter) {
	f := &fakeSetter{}
	return NewConsumer(ConsumerOptions{Announcer: f, Classes: announce.Classes{Classless: true}, Recorder: rec, Registerer: reg,
		Interfaces: func(netip.Addr, *corev1.Node) ([]string, error) { return []string{"eth0"}, nil }}), f
}

// order is the election order of vip over nodes node1..node3 without selectors.
func order(t *testing.T, w *world, vip string) []string {
	nodes, err := w.state("node1").Store.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return election.Candidates(election.Input{VIP: netip.MustParseAddr(vip), Nodes: nodes})
}

func TestConsumerAnnouncesWonVIPsOnly(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"node1", "node2", "node3"} {
		w.node(n, map[string]string{"rack": n})
	}
	w.pool("l2", &v1alpha1.L2Announce{}, "198.18.10.0/24")
	w.pool("no-announce", nil, "198.18.11.0/24")
	w.service("web", false, []string{"198.18.10.1"})
	w.service("quiet", false, []string{"198.18.11.1"})     // pool without spec.announce.l2
	w.service("elsewhere", false, []string{"198.18.99.1"}) // in no pool
	o := order(t, w, "198.18.10.1")

	for _, me := range []string{"node1", "node2", "node3"} {
		c, f := newTestConsumer(nil, nil)
		if err := c.Sync(context.Background(), w.state(me, "node1", "node2", "node3")); err != nil {
			t.Fatal(err)
		}
		want := []string(nil)
		if me == o[0] {
			want = []string{"198.18.10.1@eth0"}
		}
		if got := f.addrs(); !slices.Equal(got, want) {
			t.Errorf("%s announces %v, want %v", me, got, want)
		}
	}
}

func TestConsumerTakesOverFromDeadNode(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"node1", "node2", "node3"} {
		w.node(n, nil)
	}
	w.pool("l2", &v1alpha1.L2Announce{Interfaces: []string{"bond0"}}, "198.18.10.0/24")
	w.service("web", false, []string{"198.18.10.1"})
	o := order(t, w, "198.18.10.1")
	winner, next := o[0], o[1]

	rec := events.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	c, f := newTestConsumer(rec, reg)
	var asked []string
	c.opts.AskReassert = func(node string) { asked = append(asked, node) }
	all := []string{"node1", "node2", "node3"}
	if err := c.Sync(context.Background(), w.state(next, all...)); err != nil {
		t.Fatal(err)
	}
	if len(f.set) != 0 {
		t.Fatalf("%s announces %v while %s is alive", next, f.addrs(), winner)
	}
	var without []string
	for _, n := range all {
		if n != winner {
			without = append(without, n)
		}
	}
	if err := c.Sync(context.Background(), w.state(next, without...)); err != nil {
		t.Fatal(err)
	}
	if got := f.addrs(); !slices.Equal(got, []string{"198.18.10.1@bond0"}) {
		t.Fatalf("%s announces %v after %s died, want the VIP on the pool's interface", next, got, winner)
	}
	select {
	case ev := <-rec.Events:
		want := "Normal " + ReasonAnnouncing + " node " + next + " announces 198.18.10.1 by ARP (previously: " + winner + ")"
		if ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	default:
		t.Error("no event for the takeover")
	}
	if got := testutil.ToFloat64(c.metrics.takeovers); got != 1 {
		t.Errorf("takeovers = %v, want 1", got)
	}
	// A third sync with the same view: no new event, no new takeover.
	if err := c.Sync(context.Background(), w.state(next, without...)); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 {
		t.Errorf("repeated event: %q", <-rec.Events)
	}
	// The winner comes back (a healed partition looks the same): next withdraws.
	if err := c.Sync(context.Background(), w.state(next, all...)); err != nil {
		t.Fatal(err)
	}
	if len(f.set) != 0 {
		t.Errorf("%s still announces %v after %s came back", next, f.addrs(), winner)
	}
	// It never saw itself dead: next asks it to announce again, once, and only then.
	if !slices.Equal(asked, []string{winner}) {
		t.Errorf("%s asked %v to announce again, want %s once, when it came back", next, asked, winner)
	}
}

func TestConsumerSelectorsAndLocalEndpoints(t *testing.T) {
	w := newWorld(t)
	w.node("node1", map[string]string{"l2": "yes"})
	w.node("node2", map[string]string{"l2": "yes"})
	w.node("node3", nil)
	w.pool("l2", &v1alpha1.L2Announce{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"l2": "yes"}}}, "198.18.10.0/24")
	// Cluster policy: any selected node; node3 is never chosen.
	w.service("cluster", false, []string{"198.18.10.1"})
	// Local policy with its only endpoint on node2: node2 announces (node3 has one too, but is
	// not selected).
	w.service("local", true, []string{"198.18.10.2"}, "node2", "node3")

	got := map[string][]string{}
	for _, me := range []string{"node1", "node2", "node3"} {
		c, f := newTestConsumer(nil, nil)
		if err := c.Sync(context.Background(), w.state(me, "node1", "node2", "node3")); err != nil {
			t.Fatal(err)
		}
		for _, v := range f.set {
			got[v.Addr.String()] = append(got[v.Addr.String()], me)
		}
	}
	if n := got["198.18.10.1"]; len(n) != 1 || n[0] == "node3" {
		t.Errorf("198.18.10.1 announced by %v, want one selected node", n)
	}
	if n := got["198.18.10.2"]; !slices.Equal(n, []string{"node2"}) {
		t.Errorf("198.18.10.2 (Local) announced by %v, want node2", n)
	}
}

// TestConsumerReannouncesWhenTheViewGrows: a healed partition looks like nodes coming back;
// the announcer sends a new round of gratuitous announcements for what it keeps.
func TestConsumerReannouncesWhenTheViewGrows(t *testing.T) {
	w := newWorld(t)
	for _, n := range []string{"node1", "node2", "node3"} {
		w.node(n, nil)
	}
	w.pool("l2", &v1alpha1.L2Announce{}, "198.18.10.0/24")
	w.service("web", false, []string{"198.18.10.1"})
	o := order(t, w, "198.18.10.1")
	c, f := newTestConsumer(nil, nil)
	for _, view := range [][]string{{o[0]}, {o[0], o[1]}, {o[0], o[1]}, {o[0], o[1], o[2]}} {
		if err := c.Sync(context.Background(), w.state(o[0], view...)); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.set) != 1 || f.reannounced != 2 {
		t.Errorf("announces %v, reannounced %d times; want the VIP, re-announced on each of the 2 growths", f.addrs(), f.reannounced)
	}
}

// TestConsumerAddsNothingWhileRulesFail: in a sync whose rules failed (State.RulesFailed) the
// winner keeps the VIPs it announced and still withdraws, but a VIP new to it waits for the
// next sync whose rules are programmed, which then counts it as taken over.
func TestConsumerAddsNothingWhileRulesFail(t *testing.T) {
	w := newWorld(t)
	w.node("node1", nil)
	w.pool("l2", &v1alpha1.L2Announce{}, "198.18.10.0/24")
	w.service("web", false, []string{"198.18.10.1"})
	rec := events.NewFakeRecorder(10)
	c, f := newTestConsumer(rec, nil)
	sync := func(rulesFailed bool) {
		t.Helper()
		st := w.state("node1")
		st.RulesFailed = rulesFailed
		if err := c.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	sync(false)
	<-rec.Events

	w.service("api", false, []string{"198.18.10.2"})
	sync(true)
	if got := f.addrs(); !slices.Equal(got, []string{"198.18.10.1@eth0"}) {
		t.Errorf("rules failed: announces %v, want the VIP it had only", got)
	}
	if err := w.svcs.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	sync(true)
	if got := f.addrs(); len(got) != 0 {
		t.Errorf("rules failed, web deleted: announces %v, want nothing (withdrawals go on)", got)
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("event while rules failed: %q", ev)
	default:
	}

	sync(false)
	if got := f.addrs(); !slices.Equal(got, []string{"198.18.10.2@eth0"}) {
		t.Errorf("rules programmed: announces %v, want the new VIP", got)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "announces 198.18.10.2") {
			t.Errorf("event %q, want the new VIP's", ev)
		}
	default:
		t.Error("no event once the new VIP was announced")
	}
}
