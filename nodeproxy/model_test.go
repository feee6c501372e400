package nodeproxy

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

func ptr[T any](v T) *T { return &v }

func TestServicePorts(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeLoadBalancer,
			ClusterIPs:               []string{"198.18.0.10", "fd00:c613:ffff::10"},
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      30000,
			LoadBalancerSourceRanges: []string{" 198.19.0.0/24", "fd00:c613::/64"},
			SessionAffinity:          corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "198.18.128.1"}, {IP: "198.18.128.2", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
		}}},
	}
	slice := &discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)},
			{Name: ptr("dns"), Port: ptr(int32(5353)), Protocol: ptr(corev1.ProtocolUDP)},
		},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"198.19.1.2"}, NodeName: ptr("node1")},
			{Addresses: []string{"198.19.2.2"}, NodeName: ptr("node2"), Conditions: discoveryv1.EndpointConditions{
				Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}},
		},
	}
	v6slice := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6}

	ports := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice, v6slice}, Node{Name: "node1"}, rules.IPv4)
	if len(ports) != 2 {
		t.Fatalf("got %d ports, want 2", len(ports))
	}
	web, dns := ports[0], ports[1]
	if web.Key() != "ns/web:http/tcp" || dns.Key() != "ns/web:dns/udp" {
		t.Errorf("keys %s, %s", web.Key(), dns.Key())
	}
	if web.ClusterIP.String() != "198.18.0.10" || web.NodePort != 30080 || !web.ExternalLocal || web.HealthCheckNodePort != 30000 {
		t.Errorf("web port: %+v", web)
	}
	if len(web.LoadBalancerIPs) != 1 || web.LoadBalancerIPs[0].String() != "198.18.128.1" {
		t.Errorf("LB IPs %v: want only the VIP-mode one", web.LoadBalancerIPs)
	}
	if len(web.SourceRanges) != 1 || web.SourceRanges[0].String() != "198.19.0.0/24" {
		t.Errorf("source ranges %v: want the IPv4 one, trimmed", web.SourceRanges)
	}
	if web.AffinitySeconds != 10800 {
		t.Errorf("affinity %d, want the default 10800", web.AffinitySeconds)
	}
	if len(web.Endpoints) != 2 || web.Endpoints[0].Port != 8080 || !web.Endpoints[0].Local || !web.Endpoints[0].Ready {
		t.Errorf("web endpoints %+v", web.Endpoints)
	}
	if e := web.Endpoints[1]; e.Ready || !e.Serving || !e.Terminating || e.Local {
		t.Errorf("terminating endpoint %+v", e)
	}
	if dns.Endpoints[0].Port != 5353 {
		t.Errorf("dns endpoint port %d: named port not resolved", dns.Endpoints[0].Port)
	}

	v6 := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice, v6slice}, Node{Name: "node1"}, rules.IPv6)
	if len(v6) != 2 || v6[0].ClusterIP.String() != "fd00:c613:ffff::10" || len(v6[0].Endpoints) != 0 || len(v6[0].LoadBalancerIPs) != 0 {
		t.Errorf("IPv6 ports: %+v", v6[0])
	}

	headless := svc.DeepCopy()
	headless.Spec.ClusterIPs = []string{"None"}
	if got := ServicePorts(headless, nil, Node{Name: "node1"}, rules.IPv4); got != nil {
		t.Errorf("headless service got ports %v", got)
	}
}

func TestServiceHealthCheckAnswers(t *testing.T) {
	healthy := true
	s := newServiceHealthServers(logr.Discard(), func() bool { return healthy })
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
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s := newServiceHealthServers(logr.Discard(), func() bool { return true })
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
		s.Sync(want, tc.listen)
		if a1, a2 := answers("127.0.0.1"), answers("127.0.0.2"); a1 != tc.atOne || a2 != tc.atTwo {
			t.Errorf("listen %v: 127.0.0.1 answers %v, 127.0.0.2 answers %v; want %v, %v", tc.listen, a1, a2, tc.atOne, tc.atTwo)
		}
	}
}

func TestHealthzPerFamily(t *testing.T) {
	m := newMetrics(nil)
	h := &proxyHealth{timeout: time.Hour, pending: func() time.Time { return time.Time{} }, eligible: func() bool { return true }, metrics: m}
	get := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.handler(true).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return rec.Code, body["families"].(map[string]any)
	}
	h.familySynced(rules.IPv4, nil)
	h.familySynced(rules.IPv6, errors.New("ip6tables-restore failed"))
	if code, fams := get(); code != 200 || fams["IPv6"].(map[string]any)["healthy"] != true {
		t.Errorf("a fresh IPv6 failure: %d %v, want 200 until the timeout", code, fams)
	}
	h.timeout = time.Nanosecond
	time.Sleep(time.Millisecond)
	code, fams := get()
	if code != 503 || fams["IPv6"].(map[string]any)["healthy"] != false || fams["IPv4"].(map[string]any)["healthy"] != true {
		t.Errorf("IPv6 failing past the timeout: %d %v, want 503 with IPv6 unhealthy and IPv4 healthy", code, fams)
	}
	h.familySynced(rules.IPv6, nil)
	if code, _ := get(); code != 200 {
		t.Errorf("after IPv6 recovered: %d, want 200", code)
	}
}

func TestNamedTargetPortsResolvePerEndpoint(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"198.18.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	// The EndpointSlice controller puts pods whose "web" port has different numbers into
	// different slices.
	slice := func(ip string, port int32) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}}}
	}
	ports := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice("198.19.1.2", 8080), slice("198.19.2.2", 9090)}, Node{Name: "node1"}, rules.IPv4)
	got := ports[0].ClusterEndpoints()
	if len(got) != 2 || got[0].String() != "198.19.1.2:8080" || got[1].String() != "198.19.2.2:9090" {
		t.Errorf("endpoints %v, want 198.19.1.2:8080 and 198.19.2.2:9090", got)
	}
	for _, s := range []*corev1.Service{
		{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}, Ports: svc.Spec.Ports}},
		{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.invalid", Ports: svc.Spec.Ports}},
	} {
		if got := ServicePorts(s, nil, Node{Name: "node1"}, rules.IPv4); got != nil {
			t.Errorf("%+v: got ports %v, want none", s.Spec, got)
		}
	}
}

func TestPrimaryIP(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node1"},
		{Type: corev1.NodeExternalIP, Address: "198.19.0.200"},
		{Type: corev1.NodeExternalIP, Address: "fd00:c613::200"},
		{Type: corev1.NodeInternalIP, Address: "198.19.0.11"},
		{Type: corev1.NodeInternalIP, Address: "198.19.0.12"},
	}}}
	if ip, ok := primaryIP(node, rules.IPv4); !ok || ip.String() != "198.19.0.11" {
		t.Errorf("IPv4: %v %v, want the first InternalIP", ip, ok)
	}
	if ip, ok := primaryIP(node, rules.IPv6); !ok || ip.String() != "fd00:c613::200" {
		t.Errorf("IPv6: %v %v, want the ExternalIP (no InternalIP of the family)", ip, ok)
	}
	if _, ok := primaryIP(nil, rules.IPv4); ok {
		t.Error("no Node: want no primary IP")
	}
}

// TestTopologyHints follows kube-proxy's choice of cluster endpoints under topology hints.
func TestTopologyHints(t *testing.T) {
	type ep struct {
		ip           string
		ready        bool
		zones, nodes []string
	}
	hints := func(e ep) *discoveryv1.EndpointHints {
		if e.zones == nil && e.nodes == nil {
			return nil
		}
		h := &discoveryv1.EndpointHints{}
		for _, z := range e.zones {
			h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: z})
		}
		for _, n := range e.nodes {
			h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{Name: n})
		}
		return h
	}
	me := Node{Name: "node1", Zone: "a"}
	cases := []struct {
		name string
		node Node
		eps  []ep
		want string // the cluster endpoints' IPs
	}{
		{"no hints: all", me, []ep{{"198.19.1.1", true, nil, nil}, {"198.19.2.1", true, nil, nil}}, "198.19.1.1 198.19.2.1"},
		{"zone hints: same zone", me, []ep{{"198.19.1.1", true, []string{"a"}, nil}, {"198.19.2.1", true, []string{"b"}, nil}, {"198.19.2.2", true, []string{"a", "b"}, nil}},
			"198.19.1.1 198.19.2.2"},
		{"zone hints, none for this zone: all", me, []ep{{"198.19.1.1", true, []string{"b"}, nil}, {"198.19.2.1", true, []string{"c"}, nil}}, "198.19.1.1 198.19.2.1"},
		{"zone hints on some endpoints only: all", me, []ep{{"198.19.1.1", true, []string{"a"}, nil}, {"198.19.2.1", true, nil, nil}}, "198.19.1.1 198.19.2.1"},
		{"node without a zone label: all", Node{Name: "node1"}, []ep{{"198.19.1.1", true, []string{"a"}, nil}, {"198.19.2.1", true, []string{"b"}, nil}}, "198.19.1.1 198.19.2.1"},
		{"unready endpoints without hints do not count", me, []ep{{"198.19.1.1", true, []string{"a"}, nil}, {"198.19.2.1", true, []string{"b"}, nil}, {"198.19.3.1", false, nil, nil}},
			"198.19.1.1"},
		{"node hints: same node before same zone", me, []ep{{"198.19.1.1", true, []string{"a"}, []string{"node1"}}, {"198.19.1.2", true, []string{"a"}, []string{"node9"}}},
			"198.19.1.1"},
		{"node hints, none for this node: zone", me, []ep{{"198.19.1.1", true, []string{"a"}, []string{"node8"}}, {"198.19.2.1", true, []string{"b"}, []string{"node9"}}},
			"198.19.1.1"},
	}
	for _, c := range cases {
		slice := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}}}
		for _, e := range c.eps {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.ready)}, Hints: hints(e)})
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
			ClusterIPs: []string{"198.18.0.10"}, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		ports := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice}, c.node, rules.IPv4)
		var got []string
		for _, e := range ports[0].ClusterEndpoints() {
			got = append(got, e.IP.String())
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%s: cluster endpoints %q, want %q", c.name, g, c.want)
		}
	}
}
