package dataplane_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/providers"
)

func TestClusterIPFromPod(t *testing.T) { forModes(t, testClusterIPFromPod) }

func testClusterIPFromPod(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "web")
	e.backend(e.node2, "b", "web")
	client := e.pod(e.node1, "client")
	svc := e.service("web", "web")

	dst := addrPort(clusterIP(svc), 80)
	seen := map[string]bool{}
	e.eventually("both backends answer through the ClusterIP", 30*time.Second, func() error {
		r, err := e.request(&client.Host, "tcp", dst)
		if err != nil {
			return err
		}
		if r.Client.Addr() != client.Addr {
			return fmt.Errorf("backend saw %s, want the pod's own address %s", r.Client.Addr(), client.Addr)
		}
		seen[r.Server] = true
		if len(seen) < 2 {
			return fmt.Errorf("only %v answered so far", seen)
		}
		return nil
	})
}

func TestHairpinPodReachesItself(t *testing.T) { forModes(t, testHairpinPodReachesItself) }

func testHairpinPodReachesItself(t *testing.T) {
	e := newEnv(t)
	self := e.backend(e.node1, "self", "hairpin")
	svc := e.service("hairpin", "hairpin")
	r := e.reach(&self.Host, "tcp", addrPort(clusterIP(svc), 80))
	if r.Client.Addr() == self.Addr {
		t.Errorf("hairpin connection not masqueraded: backend saw its own address %s", self.Addr)
	}
}

func TestNodePort(t *testing.T) { forModes(t, testNodePort) }

func testNodePort(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "np")
	svc := e.service("np", "np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	np := svc.Spec.Ports[0].NodePort
	for _, n := range []*netlab.Node{e.node1, e.node2} {
		r := e.reach(e.client, "tcp", addrPort(n.Addr, np))
		if r.Server == "" {
			t.Errorf("no reply through %s", n.Name)
		}
	}
}

func TestLoadBalancerIP(t *testing.T) { forModes(t, testLoadBalancerIP) }

func testLoadBalancerIP(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "lb")
	svc := e.service("lb", "lb", loadBalancer)
	vip := netip.MustParseAddr("198.18.128.11")
	e.setIngress(svc, vip, e.node1)
	r := e.reach(e.client, "tcp", netip.AddrPortFrom(vip, 80))
	if !strings.HasSuffix(r.Server, "-a") {
		t.Errorf("reply from %q", r.Server)
	}
}

func TestExternalTrafficPolicyLocal(t *testing.T) { forModes(t, testExternalTrafficPolicyLocal) }

func testExternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "etp")
	svc := e.service("etp", "etp", loadBalancer, local)
	vip := netip.MustParseAddr("198.18.128.12")
	np := svc.Spec.Ports[0].NodePort

	t.Run("source IP preserved", func(t *testing.T) {
		e.setIngress(svc, vip, e.node2)
		r := e.reach(e.client, "tcp", netip.AddrPortFrom(vip, 80))
		if r.Client.Addr() != e.client.Addr {
			t.Errorf("backend saw %s, want the client's address %s", r.Client.Addr(), e.client.Addr)
		}
		r = e.reach(e.client, "tcp", addrPort(e.node2.Addr, np))
		if r.Client.Addr() != e.client.Addr {
			t.Errorf("through the NodePort the backend saw %s, want %s", r.Client.Addr(), e.client.Addr)
		}
	})
	t.Run("dropped without local endpoint", func(t *testing.T) {
		// node1 must have programmed the LB IP (only node2's was waited for): until then the
		// packet is forwarded and the router answers "network unreachable".
		e.waitSynced()
		e.route(e.client2, vip, e.node1) // replaces the route via node2
		_, err := e.request(e.client2, "tcp", netip.AddrPortFrom(vip, 80))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("LB IP via node1 (no local endpoint): got %v, want a timeout (dropped)", err)
		}
		_, err = e.request(e.client, "tcp", addrPort(e.node1.Addr, np))
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("NodePort on node1: got %v, want a timeout (dropped)", err)
		}
	})
	t.Run("pods short-circuit to any endpoint", func(t *testing.T) {
		pod := e.pod(e.node1, "pod")
		r := e.reach(&pod.Host, "tcp", netip.AddrPortFrom(vip, 80))
		if r.Server == "" {
			t.Error("no reply")
		}
	})
	t.Run("the node itself short-circuits to any endpoint", func(t *testing.T) {
		// As kube-proxy: the node's own connections to its NodePort (and to the LB IP) go to
		// any endpoint although none is local (upstream "should implement NodePort and
		// HealthCheckNodePort correctly when ExternalTrafficPolicy changes").
		for _, dst := range []netip.AddrPort{addrPort(e.node1.Addr, np), netip.AddrPortFrom(vip, 80)} {
			if r := e.reach(&e.node1.Host, "tcp", dst); r.Server == "" {
				t.Errorf("%s from node1: no reply", dst)
			}
		}
	})
	t.Run("health check node port", func(t *testing.T) {
		hc := svc.Spec.HealthCheckNodePort
		code, body := e.httpGet(e.client, addrPort(e.node2.Addr, hc), "/any/path")
		if code != http.StatusOK || body.LocalEndpoints != 1 || !body.ServiceProxyHealthy ||
			body.Service.Namespace != e.ns || body.Service.Name != "etp" {
			t.Errorf("node2 (one local endpoint): %d %+v, want 200 with localEndpoints 1", code, body)
		}
		code, body = e.httpGet(e.client, addrPort(e.node1.Addr, hc), "/")
		if code != http.StatusServiceUnavailable || body.LocalEndpoints != 0 {
			t.Errorf("node1 (no local endpoint): %d %+v, want 503 with localEndpoints 0", code, body)
		}
	})
}

type healthBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// get sends one GET for path to addr from inside from's namespace and returns the status code
// and body.
func (e *env) get(from *netlab.Host, addr netip.AddrPort, path string) (int, []byte, error) {
	c, err := from.DialTCP(e.ctx, addr)
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getJSON is get with the body decoded into v.
func (e *env) getJSON(from *netlab.Host, addr netip.AddrPort, path string, v any) (int, error) {
	code, b, err := e.get(from, addr, path)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return 0, fmt.Errorf("%s body %q: %w", path, b, err)
	}
	return code, nil
}

// httpGet fetches path from addr inside from's namespace, retrying until it connects.
func (e *env) httpGet(from *netlab.Host, addr netip.AddrPort, path string) (int, healthBody) {
	e.t.Helper()
	var code int
	var body healthBody
	e.eventually("GET "+addr.String()+path, 30*time.Second, func() error {
		var err error
		code, err = e.getJSON(from, addr, path, &body)
		return err
	})
	return code, body
}

func TestLoadBalancerSourceRanges(t *testing.T) { forModes(t, testLoadBalancerSourceRanges) }

func testLoadBalancerSourceRanges(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "ranges")
	svc := e.service("ranges", "ranges", loadBalancer, func(s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{e.client.Addr.String() + "/32"}
	})
	vip := netip.MustParseAddr("198.18.128.13")
	e.setIngress(svc, vip, e.node1)
	e.reach(e.client, "tcp", netip.AddrPortFrom(vip, 80))
	_, err := e.request(e.client2, "tcp", netip.AddrPortFrom(vip, 80))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("client2 outside the source ranges: got %v, want a timeout (dropped)", err)
	}
}

// TestLoadBalancerSourceRangesFromTheAnnotation: ranges given only by the
// service.beta.kubernetes.io/load-balancer-source-ranges annotation are enforced, as the
// controller accepts them (on bare metal the agent is the only enforcer).
func TestLoadBalancerSourceRangesFromTheAnnotation(t *testing.T) {
	forModes(t, testLoadBalancerSourceRangesFromTheAnnotation)
}

func testLoadBalancerSourceRangesFromTheAnnotation(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "annranges")
	svc := e.service("annranges", "annranges", loadBalancer, func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.SourceRanges: e.client.Addr.String() + "/32"}
	})
	vip := netip.MustParseAddr("198.18.128.15")
	e.setIngress(svc, vip, e.node1)
	e.reach(e.client, "tcp", netip.AddrPortFrom(vip, 80))
	e.expectDropped(e.client2, netip.AddrPortFrom(vip, 80), "client2 outside the annotation's ranges")
}

// TestInvalidSourceRangesNeverHalfApplied: when a working Service's source ranges become
// invalid (a repeated CIDR, which the apiserver accepts and the controller reports as
// InvalidSpec while keeping the load balancer and its ingress), the agent enforces neither a
// part of the ranges nor none: no source reaches the LoadBalancer IP, not even one the invalid
// value names, until the value is fixed. ClusterIP and NodePort are not restricted by source
// ranges and keep working.
func TestInvalidSourceRangesNeverHalfApplied(t *testing.T) {
	forModes(t, testInvalidSourceRangesNeverHalfApplied)
}

func testInvalidSourceRangesNeverHalfApplied(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "badranges")
	allowed := e.client.Addr.String() + "/32"
	svc := e.service("badranges", "badranges", loadBalancer, func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.SourceRanges: allowed}
	})
	vip := netip.MustParseAddr("198.18.128.16")
	dst := netip.AddrPortFrom(vip, 80)
	e.setIngress(svc, vip, e.node1)
	e.reach(e.client, "tcp", dst)

	invalid := allowed + ", " + e.client.Addr.String() + "/32"
	svc = e.updateService("badranges", func(s *corev1.Service) { s.Annotations[annotations.SourceRanges] = invalid })
	// The controller's verdict on this very Service (the rule both apply).
	if _, errs := servicemodel.BuildLoadBalancer(svc, nil, providers.Capabilities{}, nil); !strings.Contains(errs.ToAggregate().Error(), "metadata.annotations["+annotations.SourceRanges+"]") {
		t.Fatalf("the controller would not report %q: %v", invalid, errs)
	}
	e.eventually("the LB IP closed to every source", 30*time.Second, func() error {
		if _, err := e.request(e.client, "tcp", dst); !isTimeout(err) {
			return fmt.Errorf("client named by the invalid ranges: got %v, want a timeout (dropped)", err)
		}
		return nil
	})
	e.expectDropped(e.client2, dst, "client2 with invalid ranges")
	e.reach(e.client2, "tcp", addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort))

	e.updateService("badranges", func(s *corev1.Service) { s.Annotations[annotations.SourceRanges] = allowed })
	e.reach(e.client, "tcp", dst)
	e.expectDropped(e.client2, dst, "client2 after the fix")
}

// updateService gets the Service name, mutates it and updates it.
func (e *env) updateService(name string, mutate func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	return services.Helper{TB: e.t, CS: e.cs, Namespace: e.ns}.Update(name, mutate)
}

// expectDropped checks that from gets no answer at all from dst (a DROP, not a refusal).
func (e *env) expectDropped(from *netlab.Host, dst netip.AddrPort, what string) {
	e.t.Helper()
	if _, err := e.request(from, "tcp", dst); !isTimeout(err) {
		e.t.Errorf("%s: got %v, want a timeout (dropped)", what, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestSessionAffinity(t *testing.T) {
	forModes(t, testSessionAffinity)
}

func testSessionAffinity(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.backend(e.node2, n, "sticky")
	}
	svc := e.service("sticky", "sticky", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	})
	dst := addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort)
	// Wait until all three endpoints are programmed, then every request sticks to one.
	e.waitEndpoints("sticky", 3)
	first := e.reach(e.client, "tcp", dst).Server
	for i := range 15 {
		r, err := e.request(e.client, "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		if r.Server != first {
			t.Fatalf("request %d went to %s, the first to %s: affinity not kept", i, r.Server, first)
		}
	}
}

func TestRejectWithoutEndpoints(t *testing.T) { forModes(t, testRejectWithoutEndpoints) }

func testRejectWithoutEndpoints(t *testing.T) {
	e := newEnv(t)
	svc := e.service("nobody", "nobody-here")
	pod := e.pod(e.node1, "client")
	dst := addrPort(clusterIP(svc), 80)
	e.eventually("connection refused", 30*time.Second, func() error {
		start := time.Now()
		_, err := e.request(&pod.Host, "tcp", dst)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("got %v, want connection refused", err)
		}
		if d := time.Since(start); d > time.Second {
			return fmt.Errorf("refused only after %s", d)
		}
		return nil
	})
}

func TestTerminatingEndpointFallback(t *testing.T) { forModes(t, testTerminatingEndpointFallback) }

func testTerminatingEndpointFallback(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "old", "term")
	svc := e.service("term", "term", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	dst := addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort)
	e.reach(e.client, "tcp", dst)
	if err := shared.cluster.StartTerminating(e.ctx, e.ns, "old"); err != nil {
		t.Fatal(err)
	}
	e.eventually("endpoint terminating", 30*time.Second, func() error {
		s, err := e.cs.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=term"})
		if err != nil {
			return err
		}
		for _, sl := range s.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
					return nil
				}
			}
		}
		return errors.New("not terminating yet")
	})
	e.waitSynced()
	for range 5 {
		if _, err := e.request(e.client, "tcp", dst); err != nil {
			t.Fatalf("serving terminating endpoint not used as fallback: %v", err)
		}
	}
}

func TestUDPAfterEndpointChange(t *testing.T) { forModes(t, testUDPAfterEndpointChange) }

func testUDPAfterEndpointChange(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "first", "udp")
	svc := e.service("udp", "udp", withUDP, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	dst := addrPort(e.node1.Addr, svc.Spec.Ports[1].NodePort)
	// One socket, one source port: the conntrack entry stays as long as datagrams keep coming.
	conn := e.udpSocket(e.client, dst)
	if got := e.udpAsk(conn, 30*time.Second); !strings.HasSuffix(got, "-first") {
		t.Fatalf("first answer from %q", got)
	}
	e.backend(e.node2, "second", "udp")
	if err := shared.cluster.ForceDelete(e.ctx, e.ns, "first"); err != nil {
		t.Fatal(err)
	}
	if got := e.udpAsk(conn, 30*time.Second, "-second"); !strings.HasSuffix(got, "-second") {
		t.Fatalf("after the change the answer came from %q", got)
	}
}

func (e *env) udpSocket(from *netlab.Host, dst netip.AddrPort) net.Conn {
	e.t.Helper()
	c, err := from.DialUDP(e.ctx, dst)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// udpAsk sends a datagram every 200ms until a reply (whose server ends in suffix, if given)
// arrives, and returns the replying server.
func (e *env) udpAsk(c net.Conn, timeout time.Duration, suffix ...string) string {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 512)
	last := ""
	for time.Now().Before(deadline) {
		_, _ = c.Write([]byte("ping\n"))
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		r, err := netlab.ParseReply(string(buf[:n]))
		if err != nil {
			continue
		}
		last = r.Server
		if len(suffix) == 0 || strings.HasSuffix(r.Server, suffix[0]) {
			return r.Server
		}
	}
	return last
}

func TestAgentRestartKeepsConnections(t *testing.T) { forModes(t, testAgentRestartKeepsConnections) }

func testAgentRestartKeepsConnections(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "restart")
	svc := e.service("restart", "restart", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	dst := addrPort(e.node1.Addr, svc.Spec.Ports[0].NodePort)
	e.reach(e.client, "tcp", dst)
	c, err := e.client.DialTCP(e.ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	echo := func(msg string) error {
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return err
		}
		got, err := br.ReadString('\n')
		if err != nil || got != msg+"\n" {
			return fmt.Errorf("echo of %q: %q, %v", msg, got, err)
		}
		return nil
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// Steady traffic on the connection while the agent restarts.
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := echo(fmt.Sprintf("msg%d", i)); err != nil {
				errc <- err
				return
			}
		}
	}()
	stopAgent(t, e.node1)
	time.Sleep(500 * time.Millisecond)
	restartAgent(t, e.node1)
	time.Sleep(time.Second)
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("established connection broken by the restart: %v", err)
	}
	if _, err := e.request(e.client, "tcp", dst); err != nil {
		t.Errorf("new connection after restart: %v", err)
	}
}

func TestDriftIsRepaired(t *testing.T) { forModes(t, testDriftIsRepaired) }

func testDriftIsRepaired(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "drift")
	svc := e.service("drift", "drift", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	pod := e.pod(e.node1, "client")
	dst := addrPort(clusterIP(svc), 80)
	e.reach(&pod.Host, "tcp", dst)
	if e.mode == modeNFTables {
		// The Service's chain flushed, then the base chain's jump: each comes back with the
		// full resync.
		for _, chain := range []string{"int-" + e.ns + "/drift/tcp/tcp", "nat-prerouting"} {
			if out, err := e.node1.Exec(e.ctx, "nft", "flush", "chain", "ip", "portico", chain); err != nil {
				t.Fatalf("flushing %s: %v\n%s", chain, err, out)
			}
			e.reach(&pod.Host, "tcp", dst)
		}
		return
	}
	bucket := fmt.Sprintf("PTC-SVC-%02X", clusterIP(svc).As4()[3])
	if _, err := e.node1.Exec(e.ctx, "iptables", "-t", "nat", "-F", bucket); err != nil {
		t.Fatal(err)
	}
	// The full resync (every 5s in these tests) rewrites the chain.
	e.reach(&pod.Host, "tcp", dst)

	// A deleted jump in a built-in chain is put back.
	if _, err := e.node1.Exec(e.ctx, "iptables", "-t", "nat", "-D", "PREROUTING",
		"-m", "comment", "--comment", "portico-agent", "-j", "PTC-SERVICES"); err != nil {
		t.Fatal(err)
	}
	e.reach(&pod.Host, "tcp", dst)
}

func TestCleanupRemovesEverything(t *testing.T) { forModes(t, testCleanupRemovesEverything) }

func testCleanupRemovesEverything(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node2, "a", "cleanup")
	svc := e.service("cleanup", "cleanup", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	dst := addrPort(e.node2.Addr, svc.Spec.Ports[0].NodePort)
	e.reach(e.client, "tcp", dst)

	stopAgent(t, e.node2)
	defer restartAgent(t, e.node2)
	if out, err := e.node2.Exec(e.ctx, shared.agent, "--cleanup"); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		out, err := e.node2.Exec(e.ctx, bin)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "PTC-") || strings.Contains(string(out), "portico-agent") {
			t.Errorf("%s after --cleanup still shows owned rules:\n%s", bin, out)
		}
	}
	// Both modes' state goes, whichever mode ran.
	if out, err := e.node2.Exec(e.ctx, "nft", "list", "tables"); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(out), "portico") {
		t.Errorf("nft list tables after --cleanup still shows the agent's table:\n%s", out)
	}
	if _, err := e.request(e.client, "tcp", dst); err == nil {
		t.Error("NodePort still answers after --cleanup")
	}
}

// metric sums the samples of name whose labels contain every one of labels (`key="value"`),
// as node's agent reports them on /metrics.
func (e *env) metric(node *netlab.Node, name string, labels ...string) (float64, error) {
	_, body, err := e.get(e.client, netip.AddrPortFrom(node.Addr, 10249), "/metrics")
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok || !containsAll(series, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("no metric %s%v on %s", name, labels, node.Name)
	}
	return sum, sc.Err()
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestPeriodicResyncWithoutDriftWritesNothing: with every kind of rule in place (affinity,
// externalTrafficPolicy: Local with a health check, source ranges, UDP NodePorts, rejects,
// internalTrafficPolicy: Local drops, IPv6), a periodic full sync finds the kernel as it wants
// it and restores no chain.
func TestPeriodicResyncWithoutDriftWritesNothing(t *testing.T) {
	forModes(t, testPeriodicResyncWithoutDriftWritesNothing)
}

func testPeriodicResyncWithoutDriftWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.backend(e.node1, "a", "quiet")
	e.backend(e.node2, "b", "quiet")
	e.service("affinity", "quiet", withUDP, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	})
	lb := e.service("lb", "quiet", loadBalancer, local, dualStack, func(s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{e.client.Addr.String() + "/32", "fd00:c613::/48"}
	})
	e.setIngress(lb, netip.MustParseAddr("198.18.128.14"), e.node1)
	e.service("empty", "nobody-here", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	e.service("itp", "quiet", func(s *corev1.Service) {
		p := corev1.ServiceInternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = &p
	})
	// Addresses ending in a zero byte: bucket 0, whose mask iptables-save prints as "::/::ff".
	e.service("zero", "quiet", dualStack, func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "fd00:c613:ff00::7700", []string{"fd00:c613:ff00::7700", "198.18.77.0"}
	})
	e.reach(e.client, "tcp", netip.AddrPortFrom(netip.MustParseAddr("198.18.128.14"), 80))

	written, report := "portico_agent_sync_proxy_rules_chains_restored_total", "Full sync wrote chains"
	if e.mode == modeNFTables {
		// Without a commit by anyone else since its own, the agent writes only differences.
		written, report = "portico_agent_sync_proxy_rules_nftables_objects_written_total", `"Programmed nftables" family="IPv4" full=true`
	}
	const fullSyncs = "portico_agent_sync_full_proxy_rules_duration_seconds_count"
	// Other tests' namespaces may still be going away: a full sync that carries such a change
	// writes its chains. Wait for one full sync with nothing to carry.
	e.eventually("a full sync that restores nothing", 90*time.Second, func() error {
		w0, err := e.metric(e.node1, written, `sync="full"`)
		if err != nil {
			return err
		}
		n0, err := e.metric(e.node1, fullSyncs)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			n1, err := e.metric(e.node1, fullSyncs)
			if err != nil {
				return err
			}
			if n1 == n0 {
				continue
			}
			w1, err := e.metric(e.node1, written, `sync="full"`)
			if err != nil {
				return err
			}
			if w1 != w0 {
				return fmt.Errorf("full syncs %v -> %v restored %v chains; the agent's last report: %s", n0, n1, w1-w0, lastLine(e.node1, report))
			}
			return nil
		}
		return errors.New("no full sync within 20s")
	})
}

// lastLine is the last line of node's shared agent output that contains text.
func lastLine(node *netlab.Node, text string) string {
	shared.mu.Lock()
	p := shared.agents[node.Name]
	shared.mu.Unlock()
	lines := strings.Split(p.Output(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], text) {
			return lines[i]
		}
	}
	return "(none)"
}
