package serviceports

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			// publishNotReadyAddresses: the EndpointSlice controller says ready while terminating.
			{Addresses: []string{"198.19.2.3"}, NodeName: ptr("node2"), Conditions: discoveryv1.EndpointConditions{
				Ready: ptr(true), Serving: ptr(false), Terminating: ptr(true)}},
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
	if len(web.Endpoints) != 3 || web.Endpoints[0].Port != 8080 || !web.Endpoints[0].Local || !web.Endpoints[0].Ready {
		t.Errorf("web endpoints %+v", web.Endpoints)
	}
	if e := web.Endpoints[1]; e.Ready || !e.Serving || !e.Terminating || e.Local {
		t.Errorf("terminating endpoint %+v", e)
	}
	if e := web.Endpoints[2]; !e.Ready || e.Serving || !e.Terminating {
		t.Errorf("terminating endpoint the slice calls ready %+v: want it ready (it is served)", e)
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

// TestSourceRangesAsTheControllerAccepts: the agent enforces the ranges servicerules resolves
// (the annotation alone counts), and an invalid value denies every source instead of enforcing
// a part of it or nothing.
func TestSourceRangesAsTheControllerAccepts(t *testing.T) {
	base := func(mutate func(*corev1.Service)) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"198.18.0.10"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.18.128.1"}}}},
		}
		mutate(svc)
		return svc
	}
	const ann = "service.beta.kubernetes.io/load-balancer-source-ranges"
	cases := []struct {
		name    string
		svc     *corev1.Service
		ranges  string // the IPv4 ranges enforced, space-separated
		invalid bool
	}{
		{"none", base(func(*corev1.Service) {}), "", false},
		{"annotation alone", base(func(s *corev1.Service) { s.Annotations = map[string]string{ann: "198.19.0.0/24, fd00:c613::/48"} }), "198.19.0.0/24", false},
		{"spec wins", base(func(s *corev1.Service) {
			s.Annotations = map[string]string{ann: "198.19.0.0/24"}
			s.Spec.LoadBalancerSourceRanges = []string{"198.19.1.0/24"}
		}), "198.19.1.0/24", false},
		{"invalid spec item: nothing half-applied", base(func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"198.19.1.0/24", "nope"}
		}), "", true},
		{"invalid annotation: nothing half-applied", base(func(s *corev1.Service) { s.Annotations = map[string]string{ann: "198.19.0.0/24, 198.19.0.9/24"} }), "", true},
		{"not a LoadBalancer: no ranges", base(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Annotations = map[string]string{ann: "bogus"}
		}), "", false},
	}
	for _, c := range cases {
		ports := ServicePorts(c.svc, nil, Node{Name: "node1"}, rules.IPv4)
		var got []string
		for _, p := range ports[0].SourceRanges {
			got = append(got, p.String())
		}
		if g := strings.Join(got, " "); g != c.ranges || ports[0].SourceRangesInvalid != c.invalid {
			t.Errorf("%s: ranges %q invalid %v, want %q %v", c.name, g, ports[0].SourceRangesInvalid, c.ranges, c.invalid)
		}
	}
}

func TestDeadNodeEndpointsLeftOut(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"198.18.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	type ep struct {
		ip, node string
		ready    bool
	}
	slice := func(eps ...ep) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}}}
		for _, e := range eps {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: ptr(e.node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.ready)}})
		}
		return s
	}
	cases := []struct {
		name string
		dead map[string]bool
		eps  []ep
		want string // every rendered endpoint's IP
	}{
		{"no view: all", nil, []ep{{"198.19.1.1", "node1", true}, {"198.19.2.1", "node2", true}}, "198.19.1.1 198.19.2.1"},
		{"dead node's endpoints left out", map[string]bool{"node2": true},
			[]ep{{"198.19.1.1", "node1", true}, {"198.19.2.1", "node2", true}, {"198.19.3.1", "node3", true}}, "198.19.1.1 198.19.3.1"},
		{"dead node's unready endpoints left out too", map[string]bool{"node2": true},
			[]ep{{"198.19.1.1", "node1", true}, {"198.19.2.1", "node2", false}}, "198.19.1.1"},
		{"only dead endpoints ready: all kept", map[string]bool{"node2": true},
			[]ep{{"198.19.1.1", "node1", false}, {"198.19.2.1", "node2", true}}, "198.19.1.1 198.19.2.1"},
		{"every endpoint dead: all kept", map[string]bool{"node2": true, "node3": true},
			[]ep{{"198.19.2.1", "node2", true}, {"198.19.3.1", "node3", true}}, "198.19.2.1 198.19.3.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ports := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice(c.eps...)}, Node{Name: "node1", Dead: c.dead}, rules.IPv4)
			var got []string
			for _, e := range ports[0].Endpoints {
				got = append(got, e.IP.String())
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("endpoints = %q, want %q", s, c.want)
			}
		})
	}
}
