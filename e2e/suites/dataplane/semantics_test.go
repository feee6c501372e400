package dataplane_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// dualStack makes a Service dual-stack with IPv6 as its primary family.
func dualStack(s *corev1.Service) {
	policy := corev1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &policy
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
}

// clusterIP6 is the Service's IPv6 ClusterIP.
func clusterIP6(t *testing.T, svc *corev1.Service) netip.Addr {
	t.Helper()
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
			return a
		}
	}
	t.Fatalf("service %s has no IPv6 ClusterIP: %v", svc.Name, svc.Spec.ClusterIPs)
	return netip.Addr{}
}

// wantDropped asserts that a TCP request times out (dropped), rather than being answered or
// refused.
func (e *env) wantDropped(from *netlab.Host, dst netip.AddrPort, what string) {
	e.t.Helper()
	_, err := e.request(from, "tcp", dst)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		e.t.Errorf("%s: got %v, want a timeout (dropped)", what, err)
	}
}

func TestIPv6(t *testing.T) { forModes(t, testIPv6) }

func testIPv6(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "v6")
	e.backend(e.node2, "b", "v6")
	svc := e.service("v6", "v6", dualStack, withUDP, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	cip := clusterIP6(t, svc)
	if !netip.MustParsePrefix("fd00:c613:ff00::/112").Contains(cip) {
		t.Fatalf("IPv6 ClusterIP %s outside the cluster's IPv6 service range", cip)
	}

	t.Run("ClusterIP from a pod", func(t *testing.T) {
		pod := e.pod(e.node1, "client")
		seen := map[string]bool{}
		e.eventually("both backends answer through the IPv6 ClusterIP", 30*time.Second, func() error {
			r, err := e.request(&pod.Host, "tcp", netip.AddrPortFrom(cip, 80))
			if err != nil {
				return err
			}
			if r.Client.Addr() != pod.Addr6 {
				return fmt.Errorf("backend saw %s, want the pod's IPv6 address %s", r.Client.Addr(), pod.Addr6)
			}
			seen[r.Server] = true
			if len(seen) < 2 {
				return fmt.Errorf("only %v answered so far", seen)
			}
			return nil
		})
		r := e.reach(&pod.Host, "udp", netip.AddrPortFrom(cip, 80))
		if r.Client.Addr() != pod.Addr6 {
			t.Errorf("UDP: backend saw %s, want %s", r.Client.Addr(), pod.Addr6)
		}
	})
	t.Run("NodePort from a client", func(t *testing.T) {
		np := svc.Spec.Ports[0].NodePort
		for _, n := range []*netlab.Node{e.node1, e.node2} {
			r := e.reach(e.client, "tcp", addrPort(n.Addr6, np))
			// externalTrafficPolicy: Cluster masquerades: the backend sees a node address.
			if r.Client.Addr() != e.node1.Addr6 && r.Client.Addr() != e.node2.Addr6 && r.Client.Addr() != n.Addr6 {
				t.Errorf("through %s the backend saw %s, want a node's IPv6 address", n.Name, r.Client.Addr())
			}
		}
		// The IPv4 side of the same Service still works.
		e.reach(e.client, "tcp", addrPort(e.node1.Addr, np))
	})
	t.Run("externalTrafficPolicy Local keeps the client address", func(t *testing.T) {
		lsvc := e.service("v6-local", "v6-local", dualStack, loadBalancer, local)
		e.backend(e.node2, "c", "v6-local")
		np := lsvc.Spec.Ports[0].NodePort
		r := e.reach(e.client, "tcp", addrPort(e.node2.Addr6, np))
		if r.Client.Addr() != e.client.Addr6 {
			t.Errorf("NodePort over IPv6: backend saw %s, want the client's %s", r.Client.Addr(), e.client.Addr6)
		}
		vip := netip.MustParseAddr("fd00:c613:ff01::12")
		e.setIngress(lsvc, vip, e.node2)
		r = e.reach(e.client, "tcp", netip.AddrPortFrom(vip, 80))
		if r.Client.Addr() != e.client.Addr6 {
			t.Errorf("LB IP over IPv6: backend saw %s, want the client's %s", r.Client.Addr(), e.client.Addr6)
		}
		e.wantDropped(e.client, addrPort(e.node1.Addr6, np), "IPv6 NodePort on node1 (no local endpoint)")
	})
}

func TestInternalTrafficPolicyLocal(t *testing.T) { forModes(t, testInternalTrafficPolicyLocal) }

func testInternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t)
	// node3 runs no agent; its pod is an endpoint that node1 and node2 could send to.
	node3 := e.lab.Nodes()[2]
	e.backend(e.node2, "here", "itp")
	e.backend(node3, "far", "itp")
	svc := e.service("itp", "itp", func(s *corev1.Service) {
		p := corev1.ServiceInternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = &p
	})
	dst := addrPort(clusterIP(svc), 80)

	onNode2 := e.pod(e.node2, "client")
	e.reach(&onNode2.Host, "tcp", dst)
	for i := range 10 {
		r, err := e.request(&onNode2.Host, "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(r.Server, "-here") {
			t.Fatalf("request %d from node2 served by %s, want the local endpoint", i, r.Server)
		}
	}
	onNode1 := e.pod(e.node1, "client")
	e.wantDropped(&onNode1.Host, dst, "pod on node1 (no local endpoint)")
	const noLocal = "portico_agent_sync_proxy_rules_no_local_endpoints_total"
	if n, err := e.metric(e.node1, noLocal, `traffic_policy="internal"`); err != nil || n < 1 {
		t.Errorf("node1 %s{internal} = %v (%v), want at least 1", noLocal, n, err)
	}
}

// namedBackend adds a pod on node serving TCP on ports, whose container declares the named
// ports of named.
func (e *env) namedBackend(node *netlab.Node, name, app string, named map[string]int32, ports ...int) *netlab.Pod {
	e.t.Helper()
	p := e.pod(node, name)
	p.StartEchoServer(e.t, "tcp", ports...)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": app}}}
	ctr := corev1.Container{Name: "app", Image: "portico.invalid/echo"}
	for n, port := range named {
		ctr.Ports = append(ctr.Ports, corev1.ContainerPort{Name: n, ContainerPort: port})
	}
	pod.Spec.Containers = []corev1.Container{ctr}
	if _, err := shared.cluster.CreateReadyPod(e.ctx, pod, node.Name, p.Addr, p.Addr6); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func TestMultiPortNamedTargetPorts(t *testing.T) { forModes(t, testMultiPortNamedTargetPorts) }

func testMultiPortNamedTargetPorts(t *testing.T) {
	e := newEnv(t)
	// The same port name on different numbers: the EndpointSlices carry each pod's number.
	e.namedBackend(e.node1, "a", "named", map[string]int32{"web": 8080}, 8080, 7070)
	e.namedBackend(e.node2, "b", "named", map[string]int32{"web": 9090}, 9090, 7070)
	svc := e.service("named", "named", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("web"), Protocol: corev1.ProtocolTCP},
			{Name: "alt", Port: 81, TargetPort: intstr.FromInt32(7070), Protocol: corev1.ProtocolTCP},
		}
	})
	pod := e.pod(e.node1, "client")
	for _, port := range []int32{80, 81} {
		dst := addrPort(clusterIP(svc), port)
		seen := map[string]bool{}
		e.eventually(fmt.Sprintf("both backends answer on port %d", port), 30*time.Second, func() error {
			r, err := e.request(&pod.Host, "tcp", dst)
			if err != nil {
				return err
			}
			seen[r.Server] = true
			if len(seen) < 2 {
				return fmt.Errorf("only %v answered so far", seen)
			}
			return nil
		})
	}
}

func TestServiceWithoutSelector(t *testing.T) { forModes(t, testServiceWithoutSelector) }

func testServiceWithoutSelector(t *testing.T) {
	e := newEnv(t)
	// A server the cluster knows nothing about but a hand-made EndpointSlice.
	backend := e.pod(e.node2, "manual")
	backend.StartEchoServer(t, "tcp", 8080)
	svc := e.service("manual", "", func(s *corev1.Service) { s.Spec.Selector = nil })
	e.handMadeSlice("manual", backend, e.node2, discoveryv1.EndpointConditions{Ready: ptr(true)})
	pod := e.pod(e.node1, "client")
	r := e.reach(&pod.Host, "tcp", addrPort(clusterIP(svc), 80))
	if r.Server != backend.Name {
		t.Errorf("answered by %q, want %q", r.Server, backend.Name)
	}
}

// handMadeSlice creates an EndpointSlice for Service svc (TCP port "tcp" to 8080) listing the
// one IPv4 endpoint backend on node with conditions, as a controller other than the
// EndpointSlice controller would.
func (e *env) handMadeSlice(svc string, backend *netlab.Pod, node *netlab.Node, conditions discoveryv1.EndpointConditions) {
	e.t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc + "-1", Namespace: e.ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc,
			discoveryv1.LabelManagedBy:   "portico-e2e",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{backend.Addr.String()}, NodeName: &node.Name, Conditions: conditions}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("tcp"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	if _, err := e.cs.DiscoveryV1().EndpointSlices(e.ns).Create(e.ctx, slice, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func TestHeadlessAndExternalNameLeftAlone(t *testing.T) {
	forModes(t, testHeadlessAndExternalNameLeftAlone)
}

func testHeadlessAndExternalNameLeftAlone(t *testing.T) {
	e := newEnv(t)
	headless := e.backend(e.node2, "headless", "headless")
	e.service("headless", "headless", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	e.service("extname", "", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = "backend.example.invalid"
		s.Spec.Selector = nil
	})
	e.eventually("headless EndpointSlice lists the pod", 30*time.Second, func() error {
		s, err := e.cs.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=headless"})
		if err != nil {
			return err
		}
		for _, sl := range s.Items {
			if len(sl.Endpoints) > 0 {
				return nil
			}
		}
		return errors.New("no endpoints yet")
	})
	// A Service created afterwards: once it answers, the agents have seen the others.
	e.backend(e.node2, "marker", "marker")
	marker := e.service("marker", "marker")
	pod := e.pod(e.node1, "client")
	e.reach(&pod.Host, "tcp", addrPort(clusterIP(marker), 80))
	for _, n := range []*netlab.Node{e.node1, e.node2} {
		dumps := [][]string{{"iptables-save"}, {"ip6tables-save"}}
		if e.mode == modeNFTables {
			dumps = [][]string{{"nft", "list", "table", "ip", "portico"}, {"nft", "list", "table", "ip6", "portico"}}
		}
		for _, dump := range dumps {
			bin := strings.Join(dump, " ")
			out, err := n.Exec(e.ctx, dump[0], dump[1:]...)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range []netip.Addr{headless.Addr, headless.Addr6} {
				if strings.Contains(string(out), ip.String()+":") || strings.Contains(string(out), "["+ip.String()+"]") ||
					strings.Contains(string(out), ip.String()+" . ") {
					t.Errorf("%s on %s has a rule for the headless Service's endpoint %s", bin, n.Name, ip)
				}
			}
			if strings.Contains(string(out), "extname") {
				t.Errorf("%s on %s mentions the ExternalName Service", bin, n.Name)
			}
		}
	}
}

func TestExternalIPs(t *testing.T) { forModes(t, testExternalIPs) }

func testExternalIPs(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "extip")
	ext := netip.MustParseAddr("198.18.130.21")
	e.service("extip", "extip", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{ext.String()} })
	for _, via := range []*netlab.Node{e.node1, e.node2} {
		e.route(e.client, ext, via)
		r := e.reach(e.client, "tcp", netip.AddrPortFrom(ext, 80))
		if !strings.HasSuffix(r.Server, "-a") {
			t.Errorf("via %s: reply from %q", via.Name, r.Server)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestHealthCheckNodePortBindFailureEvent: a healthCheckNodePort the agent cannot open (the port
// is held by something else on the node) gets kube-proxy's Warning Event, and the agent opens
// it once the port is free. Health checks are the same code in both modes; the test runs in
// both because each mode's proxier says where they listen.
func TestHealthCheckNodePortBindFailureEvent(t *testing.T) {
	forModes(t, testHealthCheckNodePortBindFailureEvent)
}

func testHealthCheckNodePortBindFailureEvent(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "hcfail")
	// Something on node1 already holds the port the Service will ask for.
	var svc *corev1.Service
	var hold net.Listener
	for port := int32(32700); port < 32767 && svc == nil; port++ {
		l, err := e.node1.Listen(e.ctx, "tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hcfail", Namespace: e.ns},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				HealthCheckNodePort: port, Selector: map[string]string{"app": "hcfail"},
				Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		if svc, err = e.cs.CoreV1().Services(e.ns).Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
			l.Close() // allocated to another Service: try the next port
			svc = nil
			continue
		}
		hold = l
	}
	if svc == nil {
		t.Fatal("no free health check node port in 32700-32766")
	}
	e.eventually("a FailedToStartServiceHealthcheck Event on the Service", 60*time.Second, func() error {
		list, err := e.cs.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == "FailedToStartServiceHealthcheck" && ev.Regarding.Name == "hcfail" && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Note, e.node1.Name) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none from %s about the health check", len(list.Items), e.node1.Name)
	})
	// Once the port is free the agent opens it (retried on every sync): no local endpoint.
	hold.Close()
	code, body := e.httpGet(e.client, addrPort(e.node1.Addr, svc.Spec.HealthCheckNodePort), "/")
	if code != 503 || body.Service.Name != "hcfail" {
		t.Errorf("node1 health check after the port was freed: %d %+v, want 503 from the agent", code, body)
	}
}
