package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

func TestServiceHealthCheckAnswers(t *testing.T) {
	healthy := true
	s := NewServers(logr.Discard(), Options{Healthy: func() bool { return healthy }})
	srv := &serviceHealthServer{}
	h := s.handler(srv)
	for _, tc := range []struct {
		local   int
		healthy bool
		code    int
	}{{1, true, 200}, {0, true, 503}, {2, false, 503}} {
		srv.state.Store(&healthCheck{Service: types.NamespacedName{Namespace: "ns", Name: "web"}, LocalEndpoints: tc.local})
		healthy = tc.healthy
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/whatever", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.code || body["localEndpoints"] != float64(tc.local) || body["serviceProxyHealthy"] != tc.healthy ||
			body["service"].(map[string]any)["name"] != "web" || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("local=%d healthy=%v: %d %s", tc.local, tc.healthy, rec.Code, rec.Body)
		}
	}
}

// TestServiceHealthCheckListenAddresses: the servers listen where they are told (loopback
// addresses here), and move when the addresses change.
func TestServiceHealthCheckListenAddresses(t *testing.T) {
	free, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(free)
	s := NewServers(logr.Discard(), Options{Healthy: func() bool { return true }})
	defer s.Close()
	want := map[uint16]healthCheck{port: {Service: types.NamespacedName{Namespace: "ns", Name: "web"}, LocalEndpoints: 1}}
	answers := func(addr string) bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	one, two := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	for _, tc := range []struct {
		listen       []netip.Addr
		atOne, atTwo bool
	}{
		{nil, true, true},
		{[]netip.Addr{two}, false, true},
		{[]netip.Addr{one}, true, false},
		{[]netip.Addr{netip.IPv4Unspecified()}, true, true},
		{[]netip.Addr{}, false, false},
	} {
		s.SyncServers(want, tc.listen)
		if a1, a2 := answers("127.0.0.1"), answers("127.0.0.2"); a1 != tc.atOne || a2 != tc.atTwo {
			t.Errorf("listen %v: 127.0.0.1 answers %v, 127.0.0.2 answers %v; want %v, %v", tc.listen, a1, a2, tc.atOne, tc.atTwo)
		}
	}
}

func TestHealthzPerFamily(t *testing.T) {
	h := NewProxyHealth(time.Hour, func() time.Time { return time.Time{} }, func() bool { return true }, nil)
	h.MarkSynced()
	get := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.Handler(Healthz).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return rec.Code, body["families"].(map[string]any)
	}
	h.FamilySynced(rules.IPv4, nil)
	h.FamilySynced(rules.IPv6, errors.New("ip6tables-restore failed"))
	if code, fams := get(); code != 200 || fams["IPv6"].(map[string]any)["healthy"] != true {
		t.Errorf("a fresh IPv6 failure: %d %v, want 200 until the timeout", code, fams)
	}
	h.timeout = time.Nanosecond
	time.Sleep(time.Millisecond)
	code, fams := get()
	if code != 503 || fams["IPv6"].(map[string]any)["healthy"] != false || fams["IPv4"].(map[string]any)["healthy"] != true {
		t.Errorf("IPv6 failing past the timeout: %d %v, want 503 with IPv6 unhealthy and IPv4 healthy", code, fams)
	}
	h.FamilySynced(rules.IPv6, nil)
	if code, _ := get(); code != 200 {
		t.Errorf("after IPv6 recovered: %d, want 200", code)
	}
}

// TestProbesAtStart: /livez answers 200 from the start, also while a change waits for caches
// that have not synced (the API server is slow) and until the timeout after they synced;
// /readyz and /healthz answer 503 until the first sync, then as /livez (and /healthz with the
// node eligible).
func TestProbesAtStart(t *testing.T) {
	const timeout = time.Hour
	pending := time.Now().Add(-2 * timeout) // a change queued long ago, while the caches listed
	eligible := false
	h := NewProxyHealth(timeout, func() time.Time { return pending }, func() bool { return eligible }, nil)
	codes := func() [3]int {
		var out [3]int
		for i, p := range []Probe{Livez, Readyz, Healthz} {
			rec := httptest.NewRecorder()
			h.Handler(p).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			out[i] = rec.Code
		}
		return out
	}
	steps := []struct {
		name string
		do   func()
		want [3]int // livez, readyz, healthz
	}{
		{"started, caches not synced", func() {}, [3]int{200, 503, 503}},
		{"caches synced: the change counts from now", h.CachesSynced, [3]int{200, 503, 503}},
		{"first sync done, node not known yet", func() { h.MarkSynced(); pending = time.Time{} }, [3]int{200, 200, 503}},
		{"node eligible", func() { eligible = true }, [3]int{200, 200, 200}},
		{"synced long ago, a change waited past the timeout", func() {
			h.cachesSynced.Store(time.Now().Add(-3 * timeout).UnixNano())
			pending = time.Now().Add(-2 * timeout)
		}, [3]int{503, 503, 503}},
	}
	for _, st := range steps {
		st.do()
		if got := codes(); got != st.want {
			t.Errorf("%s: livez, readyz, healthz = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestServersSyncCountsLocalReadyEndpoints: as a sync-loop consumer, Servers serves the
// healthCheckNodePort of every externalTrafficPolicy: Local Service with the number of its
// distinct ready endpoint IPs on this node, and stops serving Services that went away.
func TestServersSyncCountsLocalReadyEndpoints(t *testing.T) {
	free, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	port := int32(free)
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey})
	store := tracker.NewCacheStore("node1", svcs, slices, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	_ = svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"198.18.0.10"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		HealthCheckNodePort: port, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	name, p, proto, here, there, no := "http", int32(8080), corev1.ProtocolTCP, "node1", "node2", false
	_ = slices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p, Protocol: &proto}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"198.19.1.2"}, NodeName: &here},
			{Addresses: []string{"198.19.1.3"}, NodeName: &here},
			{Addresses: []string{"198.19.1.4"}, NodeName: &here, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			{Addresses: []string{"198.19.2.2"}, NodeName: &there},
		},
	})
	s := NewServers(logr.Discard(), Options{Healthy: func() bool { return true }, Families: func() []rules.Family { return []rules.Family{rules.IPv4} },
		Addresses: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.1")} }})
	defer s.Close()
	sync := func(full bool, changed ...types.NamespacedName) {
		m := map[types.NamespacedName]bool{}
		for _, k := range changed {
			m[k] = true
		}
		st, err := tracker.NewState(store, "node1", full, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	sync(true)
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ LocalEndpoints int }
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || body.LocalEndpoints != 2 {
		t.Errorf("health check: %d %+v %v, want 200 with the 2 ready local endpoints", resp.StatusCode, body, err)
	}
	_ = svcs.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	sync(false, types.NamespacedName{Namespace: "ns", Name: "web"})
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(int(port)), time.Second); err == nil {
		c.Close()
		t.Error("the health check of a deleted Service still answers")
	}
}
