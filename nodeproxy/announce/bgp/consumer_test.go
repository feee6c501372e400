package bgp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/announce"
	"github.com/portico-lb/portico/nodeproxy/tracker"
	"github.com/portico-lb/portico/servicerules"
)

// fakeSessions records what the Consumer hands its speaker.
type fakeSessions struct {
	mu      sync.Mutex
	peers   []Peer
	advs    []Advertisement
	stopped bool
	// restart is set by StopForRestart (the advertisements stay).
	restart bool
}

func (f *fakeSessions) SetPeers(_ context.Context, peers []Peer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = slices.Clone(peers)
	return nil
}

func (f *fakeSessions) SetAdvertisements(_ context.Context, advs []Advertisement) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advs = slices.Clone(advs)
	return nil
}

func (f *fakeSessions) Status(context.Context) (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := Status{Advertisements: len(f.advs)}
	for _, p := range f.peers {
		n := 0
		for _, a := range f.advs {
			if a.sendsTo(p.Address) {
				n++
			}
		}
		st.Peers = append(st.Peers, PeerStatus{Address: p.Address, State: SessionEstablished, BFD: BFDDisabled, Advertised: n})
	}
	return st, nil
}

func (f *fakeSessions) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped, f.advs = true, nil
	return nil
}

func (f *fakeSessions) StopForRestart(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped, f.restart = true, true
	return nil
}

// adverts renders the advertisements as "prefix>peer+peer" (peers by address), sorted.
func (f *fakeSessions) adverts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.advs {
		var ps []string
		for _, p := range a.Peers {
			ps = append(ps, p.String())
		}
		out = append(out, a.Prefix.String()+">"+strings.Join(ps, "+"))
	}
	slices.Sort(out)
	return out
}

func (f *fakeSessions) peerConfig(addr string) (Peer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.peers {
		if p.Address.String() == addr {
			return p, true
		}
	}
	return Peer{}, false
}

// world is the cluster one agent sees: the tracker's caches, BGPPeers behind a fake dynamic
// client and Secrets behind a fake clientset.
type world struct {
	t                          *testing.T
	svcs, slices, nodes, pools cache.Indexer
	dyn                        *dynamicfake.FakeDynamicClient
	cs                         *kubefake.Clientset
	rec                        *events.FakeRecorder
	resyncs                    chan struct{}
	sessions                   *fakeSessions
}

func newWorld(t *testing.T) *world {
	// An empty scheme: the fake dynamic client then keeps BGPPeers unstructured, as the API does.
	scheme := runtime.NewScheme()
	return &world{t: t,
		svcs:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey}),
		nodes:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pools:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		dyn:      dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{BGPPeersResource: "BGPPeerList"}),
		cs:       kubefake.NewClientset(),
		rec:      events.NewFakeRecorder(100),
		resyncs:  make(chan struct{}, 100),
		sessions: &fakeSessions{},
	}
}

func (w *world) node(name string, mutate ...func(*corev1.Node)) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name}}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("198.19.0.%d", 10+len(w.nodes.List())+1)}}
	for _, m := range mutate {
		m(n)
	}
	if err := w.nodes.Update(n); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) pool(name string, bgp *v1alpha1.BGPAnnounce, addrs ...string) {
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{Addresses: addrs, Announce: v1alpha1.Announce{BGP: bgp}}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.pools.Update(&unstructured.Unstructured{Object: u}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) service(name string, local bool, vip string, endpointNodes ...string) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	if local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip}}
	if err := w.svcs.Update(svc); err != nil {
		w.t.Fatal(err)
	}
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, n := range endpointNodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"198.19.1.1"}, NodeName: &n})
	}
	if err := w.slices.Update(s); err != nil {
		w.t.Fatal(err)
	}
}

// peer creates or replaces a BGPPeer.
func (w *world) peer(name, addr string, lbls map[string]string, mutate ...func(*v1alpha1.BGPPeer)) {
	w.t.Helper()
	bp := &v1alpha1.BGPPeer{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BGPPeer"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       v1alpha1.BGPPeerSpec{PeerAddress: addr, PeerASN: 64512, MyASN: 64513}}
	for _, m := range mutate {
		m(bp)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bp)
	if err != nil {
		w.t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	res := w.dyn.Resource(BGPPeersResource)
	ctx := context.Background()
	if old, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		obj.SetResourceVersion(old.GetResourceVersion())
		obj.SetGeneration(old.GetGeneration() + 1)
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		return
	}
	obj.SetGeneration(1)
	if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) secret(ns, name, password string) {
	w.t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"password": []byte(password)}}
	if _, err := w.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if _, err := w.cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			w.t.Fatal(err)
		}
		return
	}
	if _, err := w.cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) state(me string) *tracker.State {
	store := tracker.NewCacheStore(me, w.svcs, w.slices, w.nodes).WithPools(w.pools)
	st, err := tracker.NewState(store, me, true, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// consumer starts a Consumer for node me over the world; it is stopped at the test's end.
func (w *world) consumer(me string) *Consumer {
	w.t.Helper()
	c, err := NewConsumer(context.Background(), ConsumerOptions{Log: logr.Discard(), Node: me, Classes: announce.Classes{Classless: true}, Dynamic: w.dyn, Secrets: w.cs,
		Recorder: w.rec, StatusInterval: time.Hour,
		Resync:     func() { w.resyncs <- struct{}{} },
		NewSpeaker: func(context.Context, Options) (Sessions, error) { return w.sessions, nil },
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _, _ = c.Stop(context.Background()) })
	return c
}

// sync runs one Sync as node me once the BGPPeer watch shows every BGPPeer the fake holds.
func (w *world) sync(c *Consumer, me string) {
	w.t.Helper()
	w.syncState(c, w.state(me))
}

// syncState is sync with the State st.
func (w *world) syncState(c *Consumer, st *tracker.State) {
	w.t.Helper()
	list, err := w.dyn.Resource(BGPPeersResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !sameGenerations(c.peers.GetStore().List(), list.Items) {
		if time.Now().After(deadline) {
			w.t.Fatal("the BGPPeer watch did not catch up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Sync(context.Background(), st); err != nil {
		w.t.Fatal(err)
	}
}

func sameGenerations(cached []any, want []unstructured.Unstructured) bool {
	if len(cached) != len(want) {
		return false
	}
	gen := map[string]int64{}
	for _, o := range cached {
		u := o.(*unstructured.Unstructured)
		gen[u.GetName()] = u.GetGeneration()
	}
	for _, u := range want {
		if g, ok := gen[u.GetName()]; !ok || g != u.GetGeneration() {
			return false
		}
	}
	return true
}

func wantAdverts(t *testing.T, f *fakeSessions, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := f.adverts(); !slices.Equal(got, want) {
		t.Errorf("advertisements %q, want %q", got, want)
	}
}

// drainEvents returns the Events recorded so far.
func (w *world) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-w.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestConsumerTrafficPolicy(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.node("node2")
	w.peer("r1", "198.19.0.1", nil)
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.pool("l2-only", nil, "198.18.11.0/24")
	w.service("cluster", false, "198.18.10.1")
	w.service("local", true, "198.18.10.2", "node2")
	w.service("local-nowhere", true, "198.18.10.3")
	w.service("not-bgp", false, "198.18.11.1")
	w.service("no-pool", false, "198.18.99.1")

	c1, f1 := w.consumer("node1"), w.sessions
	w.sync(c1, "node1")
	wantAdverts(t, f1, "198.18.10.1/32>198.19.0.1")

	w.sessions = &fakeSessions{}
	c2, f2 := w.consumer("node2"), w.sessions
	w.sync(c2, "node2")
	wantAdverts(t, f2, "198.18.10.1/32>198.19.0.1", "198.18.10.2/32>198.19.0.1")

	// The endpoint moves to node1: node2 withdraws the Local VIP, node1 advertises it.
	w.service("local", true, "198.18.10.2", "node1")
	w.sync(c1, "node1")
	w.sync(c2, "node2")
	wantAdverts(t, f1, "198.18.10.1/32>198.19.0.1", "198.18.10.2/32>198.19.0.1")
	wantAdverts(t, f2, "198.18.10.1/32>198.19.0.1")
}

func TestConsumerExcludedNodeWithdrawsEverything(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exclude func(*corev1.Node)
	}{
		{"label", func(n *corev1.Node) { n.Labels[servicerules.ExcludeFromLBLabel] = "" }},
		{"taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: servicerules.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"deletion", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.node("node1")
			w.peer("r1", "198.19.0.1", nil)
			w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
			w.service("cluster", false, "198.18.10.1")
			w.service("local", true, "198.18.10.2", "node1")
			c := w.consumer("node1")
			w.sync(c, "node1")
			wantAdverts(t, w.sessions, "198.18.10.1/32>198.19.0.1", "198.18.10.2/32>198.19.0.1")

			w.node("node1", tc.exclude)
			w.sync(c, "node1")
			wantAdverts(t, w.sessions)
			if _, ok := w.sessions.peerConfig("198.19.0.1"); !ok {
				t.Error("the excluded node dropped its session; it should keep it and advertise nothing")
			}
		})
	}
}

func TestConsumerPerPeerSelection(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.peer("r1", "198.19.0.1", map[string]string{"rack": "a"})
	w.peer("r2", "198.19.0.2", map[string]string{"rack": "b"})
	w.peer("r6", "fd00:c613::1", map[string]string{"rack": "a"})
	w.peer("other-nodes", "198.19.0.3", map[string]string{"rack": "a"}, func(p *v1alpha1.BGPPeer) {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"name": "node9"}}
	})
	rackA := &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}
	w.pool("a", &v1alpha1.BGPAnnounce{PeerSelector: rackA}, "198.18.10.0/24", "fd00:c613:ff10::/120")
	w.pool("b", &v1alpha1.BGPAnnounce{Peers: []string{"r2"}}, "198.18.11.0/24")
	w.pool("all", &v1alpha1.BGPAnnounce{}, "198.18.12.0/24", "fd00:c613:ff12::/120")
	w.pool("b-and-a", &v1alpha1.BGPAnnounce{Peers: []string{"r2"}, PeerSelector: rackA}, "198.18.13.0/24")
	w.pool("v6-only-peers", &v1alpha1.BGPAnnounce{Peers: []string{"r6"}}, "198.18.14.0/24")
	w.service("a", false, "198.18.10.1")
	w.service("a6", false, "fd00:c613:ff10::1")
	w.service("b", false, "198.18.11.1")
	w.service("all", false, "198.18.12.1")
	w.service("all6", false, "fd00:c613:ff12::1")
	w.service("ba", false, "198.18.13.1")
	w.service("v4-to-v6", false, "198.18.14.1") // its pool selects only an IPv6 peer: nowhere to go
	c := w.consumer("node1")
	w.sync(c, "node1")
	want := []string{
		"198.18.10.1/32>198.19.0.1",
		"fd00:c613:ff10::1/128>fd00:c613::1",
		"198.18.11.1/32>198.19.0.2",
		"198.18.12.1/32>198.19.0.1+198.19.0.2",
		"fd00:c613:ff12::1/128>fd00:c613::1",
		"198.18.13.1/32>198.19.0.1+198.19.0.2",
	}
	wantAdverts(t, w.sessions, want...)
	if len(w.sessions.peers) != 3 {
		t.Errorf("peers %+v: want r1, r2 and r6 (not the BGPPeer of other nodes)", w.sessions.peers)
	}

	// A selection that matches no BGPPeer is invalid: the pool keeps its last valid selection.
	w.pool("a", &v1alpha1.BGPAnnounce{PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "typo"}}},
		"198.18.10.0/24", "fd00:c613:ff10::/120")
	w.pool("b", &v1alpha1.BGPAnnounce{Peers: []string{"r2", "r-typo"}}, "198.18.11.0/24")
	w.sync(c, "node1")
	wantAdverts(t, w.sessions, want...)

	// A pool that never had a valid selection is not advertised; the others do not move.
	w.pool("new", &v1alpha1.BGPAnnounce{Peers: []string{"nope"}}, "198.18.15.0/24")
	w.service("new", false, "198.18.15.1")
	w.sync(c, "node1")
	wantAdverts(t, w.sessions, want...)

	// A valid change moves the pool's prefixes to the peers it now selects.
	w.pool("a", &v1alpha1.BGPAnnounce{Peers: []string{"r2"}}, "198.18.10.0/24", "fd00:c613:ff10::/120")
	w.sync(c, "node1")
	wantAdverts(t, w.sessions,
		"198.18.10.1/32>198.19.0.2", // the pool selects no IPv6 peer any more: fd00:c613:ff10::1 withdrawn
		"198.18.11.1/32>198.19.0.2", // still its last valid selection
		"198.18.12.1/32>198.19.0.1+198.19.0.2",
		"fd00:c613:ff12::1/128>fd00:c613::1",
		"198.18.13.1/32>198.19.0.1+198.19.0.2",
	)
}

func TestConsumerInvalidPeerMovesNothing(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.peer("good", "198.19.0.1", nil)
	w.peer("bad-asn", "198.19.0.2", nil, func(p *v1alpha1.BGPPeer) { p.Spec.PeerASN = 0 })
	w.peer("no-secret", "198.19.0.3", nil, func(p *v1alpha1.BGPPeer) {
		p.Spec.PasswordSecretRef = &v1alpha1.SecretKeyRef{Namespace: "kube-system", Name: "missing"}
	})
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.service("web", false, "198.18.10.1")
	c := w.consumer("node1")
	w.sync(c, "node1")

	if len(w.sessions.peers) != 1 || w.sessions.peers[0].Address.String() != "198.19.0.1" {
		t.Errorf("peers %+v: want only the valid one", w.sessions.peers)
	}
	wantAdverts(t, w.sessions, "198.18.10.1/32>198.19.0.1")
	evs := strings.Join(w.drainEvents(), "\n")
	for _, want := range []string{"InvalidBGPPeer node node1 cannot peer: spec.peerASN", `reading Secret kube-system/missing: not found`} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	st := c.nodeStatus(context.Background())
	if st["bad-asn"].Session != SessionInvalid || !strings.Contains(st["no-secret"].Message, "not found") || st["good"].Session != string(SessionEstablished) {
		t.Errorf("status %+v: want bad-asn and no-secret Invalid with reasons, good Established", st)
	}

	// The good peer turns bad: it keeps its last valid configuration, the route stays.
	w.peer("good", "198.19.0.1", nil, func(p *v1alpha1.BGPPeer) { p.Spec.MyASN = 1 << 33 })
	w.sync(c, "node1")
	if p, ok := w.sessions.peerConfig("198.19.0.1"); !ok || p.MyASN != 64513 {
		t.Errorf("peer after a bad edit: %+v (present %v); want the last valid configuration", p, ok)
	}
	wantAdverts(t, w.sessions, "198.18.10.1/32>198.19.0.1")
	if st := c.nodeStatus(context.Background()); st["good"].Session != string(SessionEstablished) || !strings.Contains(st["good"].Message, "spec.peerASN and spec.myASN") {
		t.Errorf("status of the peer edited badly %+v: want its live state and the problem", st["good"])
	}
	if len(w.drainEvents()) != 1 {
		t.Error("want one Event for the bad edit")
	}
	w.sync(c, "node1")
	if evs := w.drainEvents(); len(evs) != 0 {
		t.Errorf("the same problem was reported again: %q", evs)
	}
}

func TestConsumerSecretRotation(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.secret("kube-system", "bgp-password", "one")
	w.peer("r1", "198.19.0.1", nil, func(p *v1alpha1.BGPPeer) {
		p.Spec.PasswordSecretRef = &v1alpha1.SecretKeyRef{Namespace: "kube-system", Name: "bgp-password"}
	})
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.service("web", false, "198.18.10.1")
	c := w.consumer("node1")
	w.sync(c, "node1")
	if p, _ := w.sessions.peerConfig("198.19.0.1"); p.Password != "one" {
		t.Fatalf("password %q, want one", p.Password)
	}
	gets := func() int {
		n := 0
		for _, a := range w.cs.Actions() {
			if a.GetResource().Resource == "secrets" && a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	before := gets()
	for range 5 {
		w.sync(c, "node1")
	}
	if n := gets() - before; n != 0 {
		t.Errorf("5 syncs read the Secret %d times from the API; want 0 (watched)", n)
	}

	// Rotation: the Secret's change asks for a sync, which restarts the session with the new
	// password.
	for len(w.resyncs) > 0 {
		<-w.resyncs
	}
	w.secret("kube-system", "bgp-password", "two")
	select {
	case <-w.resyncs:
	case <-time.After(5 * time.Second):
		t.Fatal("the Secret's change asked for no sync")
	}
	w.sync(c, "node1")
	if p, _ := w.sessions.peerConfig("198.19.0.1"); p.Password != "two" {
		t.Errorf("password after rotation %q, want two", p.Password)
	}

	// The Secret goes away: the peer keeps its last password and the problem is reported.
	if err := w.cs.CoreV1().Secrets("kube-system").Delete(context.Background(), "bgp-password", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the deletion to reach the watch", func() error {
		w.sync(c, "node1")
		if c.nodeStatus(context.Background())["r1"].Message == "" {
			return errors.New("no problem reported for r1 yet")
		}
		return nil
	})
	if p, _ := w.sessions.peerConfig("198.19.0.1"); p.Password != "two" {
		t.Errorf("password after the Secret's deletion %q, want the last valid (two)", p.Password)
	}

	// The peer stops referencing a Secret: its watch ends.
	w.peer("r1", "198.19.0.1", nil)
	w.sync(c, "node1")
	if n := len(c.secrets.watches); n != 0 {
		t.Errorf("%d Secret watches left; want 0", n)
	}
}

func TestConsumerStopWithdraws(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.peer("r1", "198.19.0.1", nil)
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.service("web", false, "198.18.10.1")
	c := w.consumer("node1")
	w.sync(c, "node1")
	wantAdverts(t, w.sessions, "198.18.10.1/32>198.19.0.1")
	kept, err := c.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !w.sessions.stopped || w.sessions.restart || kept {
		t.Errorf("Stop: speaker stopped %v, for a restart %v, kept %v; want the graceful withdraw", w.sessions.stopped, w.sessions.restart, kept)
	}
}

func TestConsumerNoPeerNoSpeaker(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.service("web", false, "198.18.10.1")
	started := false
	c, err := NewConsumer(context.Background(), ConsumerOptions{Log: logr.Discard(), Node: "node1", Classes: announce.Classes{Classless: true}, Dynamic: w.dyn, Secrets: w.cs,
		NewSpeaker: func(context.Context, Options) (Sessions, error) { started = true; return w.sessions, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Stop(context.Background()) }()
	w.sync(c, "node1")
	if started {
		t.Error("a speaker was started without any BGPPeer")
	}
}

func TestConsumerStopForRestart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		gr           time.Duration
		node         func(*corev1.Node)
		uninstalling func() bool
		wantKept     bool
	}{
		{"graceful restart, node stays", 30 * time.Second, func(*corev1.Node) {}, nil, true},
		{"graceful restart off", 0, func(*corev1.Node) {}, nil, false},
		{"node cordoned", 30 * time.Second, func(n *corev1.Node) { n.Spec.Unschedulable = true }, nil, false},
		{"node excluded", 30 * time.Second, func(n *corev1.Node) { n.Labels[servicerules.ExcludeFromLBLabel] = "true" }, nil, false},
		{"still deployed", 30 * time.Second, func(*corev1.Node) {}, func() bool { return false }, true},
		{"uninstalled", 30 * time.Second, func(*corev1.Node) {}, func() bool { return true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.node("node1", tc.node)
			w.peer("r1", "198.19.0.1", nil)
			w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
			w.service("web", false, "198.18.10.1")
			c, err := NewConsumer(context.Background(), ConsumerOptions{Log: logr.Discard(), Node: "node1", Classes: announce.Classes{Classless: true}, Dynamic: w.dyn, Secrets: w.cs,
				StatusInterval: time.Hour, GracefulRestart: tc.gr, Uninstalling: tc.uninstalling,
				NewSpeaker: func(context.Context, Options) (Sessions, error) { return w.sessions, nil }})
			if err != nil {
				t.Fatal(err)
			}
			w.sync(c, "node1")
			if p, ok := w.sessions.peerConfig("198.19.0.1"); !ok || p.GracefulRestart != tc.gr {
				t.Errorf("peer handed to the speaker: %+v (found %v); want gracefulRestart %s", p, ok, tc.gr)
			}
			kept, err := c.Stop(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if kept != tc.wantKept || w.sessions.restart != tc.wantKept || !w.sessions.stopped {
				t.Errorf("Stop: kept %v, speaker stopped %v, for a restart %v; want kept %v", kept, w.sessions.stopped, w.sessions.restart, tc.wantKept)
			}
		})
	}
}

// TestConsumerAddsNothingWhileRulesFail: in a sync whose rules failed (State.RulesFailed) the
// node keeps the routes it advertised and still withdraws, but advertises no new prefix and no
// prefix to a new peer until a sync programs the rules.
func TestConsumerAddsNothingWhileRulesFail(t *testing.T) {
	w := newWorld(t)
	w.node("node1")
	w.peer("r1", "198.19.0.1", nil)
	w.pool("bgp", &v1alpha1.BGPAnnounce{}, "198.18.10.0/24")
	w.service("web", false, "198.18.10.1")
	c, f := w.consumer("node1"), w.sessions
	w.sync(c, "node1")
	wantAdverts(t, f, "198.18.10.1/32>198.19.0.1")

	failed := func() *tracker.State {
		st := w.state("node1")
		st.RulesFailed = true
		return st
	}
	w.service("api", false, "198.18.10.2")
	w.peer("r2", "198.19.0.2", nil)
	w.syncState(c, failed())
	wantAdverts(t, f, "198.18.10.1/32>198.19.0.1")

	if err := w.svcs.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	w.syncState(c, failed())
	wantAdverts(t, f)

	w.sync(c, "node1")
	wantAdverts(t, f, "198.18.10.2/32>198.19.0.1+198.19.0.2")
}
