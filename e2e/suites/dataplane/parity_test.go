package dataplane_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// kubeProxyNode is the lab node (index) where TestProbesMatchKubeProxy runs kube-proxy in each
// mode: one of the nodes no shared agent uses.
var kubeProxyNode = map[string]int{modeIPTables: 2, modeNFTables: 6}

// TestProbesMatchKubeProxy (issue 31 item 11): the same packet probes, sent through a node
// programmed by portico-agent and through a node programmed by kube-proxy v1.36.3 in the mode
// of the same name, for the same Services, get the same answer: served (and whether the
// backend saw the client's address), refused (ICMP port unreachable or RST), unreachable, or
// dropped (no answer). Each node is the first hop of its probes (the client routes the
// addresses to it); the endpoints are pods on other nodes, and for the local cases on the
// probed node itself. What a node forwards without DNAT reaches the lab's router, which answers
// "unreachable" for these addresses. On 3e563f2 the agent's iptables mode let a client inside
// loadBalancerSourceRanges through to an externalTrafficPolicy: Local LB IP without a local
// endpoint (the source range's RETURN skipped the drop), which the router then refused;
// kube-proxy's iptables mode drops it. The nftables mode answered all 16 probes as kube-proxy's.
func TestProbesMatchKubeProxy(t *testing.T) { forModes(t, testProbesMatchKubeProxy) }

func testProbesMatchKubeProxy(t *testing.T) {
	e := newEnv(t)
	kp := e.lab.Nodes()[kubeProxyNode[e.mode]]
	bins, err := k8sbin.Ensure(e.ctx, k8sbin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy takes one cluster CIDR per family, and the lab has one per node: it tells
	// pods by the Node's podCIDRs instead (the probes' pods are on the probed nodes).
	proc, err := kp.Start(bins.KubeProxy, "--kubeconfig="+shared.kubecfg, "--hostname-override="+kp.Name,
		"--proxy-mode="+e.mode, "--detect-local-mode=NodeCIDR",
		"--metrics-bind-address=0.0.0.0:10249", "--healthz-bind-address=0.0.0.0:10256",
		"--iptables-min-sync-period=100ms", "--conntrack-max-per-core=0", "--v=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.Stop()
		if t.Failed() {
			t.Logf("kube-proxy on %s, output tail:\n%s", kp.Name, tail(proc.Output()))
		}
		// Its rules go with it: the node hosts other tests' pods.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := kp.Exec(ctx, bins.KubeProxy, "--cleanup", "--proxy-mode="+e.mode); err != nil {
			t.Logf("kube-proxy --cleanup on %s: %v\n%s", kp.Name, err, out)
		}
	})
	probed := []*netlab.Node{e.node1, kp}
	// What a node forwards without DNAT goes to the router (harness_test.go's route). The
	// router answers it with ICMP "administratively prohibited", as a next hop of a real
	// network would answer an address it cannot deliver, instead of dropping it: a packet a
	// node lets through is told apart from one the node drops.
	for _, r := range []string{"198.18.128.48/28", "198.18.130.48/28"} {
		if _, err := e.lab.Router().Exec(e.ctx, "ip", "route", "replace", "prohibit", r); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = e.lab.Router().Exec(context.Background(), "ip", "route", "del", "prohibit", r) })
	}

	// Endpoints on node2 only: remote for both probed nodes.
	e.backend(e.node2, "remote", "remote")
	// One endpoint on each probed node: local for both.
	e.backend(e.node1, "local-a", "local")
	e.backend(kp, "local-b", "local")
	itpLocal := func(s *corev1.Service) {
		p := corev1.ServiceInternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = &p
	}
	inRange := func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{e.client.Addr.String() + "/32"} }
	vips := map[string]netip.Addr{}
	lb := func(name, app, vip string, mutate ...func(*corev1.Service)) *corev1.Service {
		svc := e.service(name, app, append([]func(*corev1.Service){loadBalancer}, mutate...)...)
		vips[name] = netip.MustParseAddr(vip)
		e.setIngress(svc, vips[name], e.node1)
		return svc
	}
	cluster := lb("cluster", "remote", "198.18.128.51")
	lb("ranges", "remote", "198.18.128.52", inRange)
	noLocal := lb("no-local", "remote", "198.18.128.53", local)
	lb("has-local", "local", "198.18.128.54", local)
	empty := lb("empty", "nobody", "198.18.128.55")
	lb("ranges-local", "local", "198.18.128.56", local, inRange)
	lb("ranges-no-local", "remote", "198.18.128.57", local, inRange)
	ext := netip.MustParseAddr("198.18.130.51")
	e.service("external-ip", "remote", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{ext.String()} })
	itp := e.service("itp-no-local", "remote", itpLocal)

	// A Service created last: once both nodes serve it, they programmed the others.
	marker := e.service("marker", "remote", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	for _, n := range probed {
		e.reach(e.client, "tcp", addrPort(n.Addr, marker.Spec.Ports[0].NodePort))
	}

	type probe struct {
		name string
		from func(n *netlab.Node) *netlab.Host
		dst  func(n *netlab.Node) netip.AddrPort
		// route: the destination the client sends via the probed node (zero: already so).
		route netip.Addr
	}
	client := func(*netlab.Node) *netlab.Host { return e.client }
	client2 := func(*netlab.Node) *netlab.Host { return e.client2 }
	podOn := map[string]*netlab.Pod{}
	for _, n := range probed {
		podOn[n.Name] = e.pod(n, "prober")
	}
	pod := func(n *netlab.Node) *netlab.Host { return &podOn[n.Name].Host }
	vip := func(name string) func(*netlab.Node) netip.AddrPort {
		return func(*netlab.Node) netip.AddrPort { return netip.AddrPortFrom(vips[name], 80) }
	}
	nodePort := func(svc *corev1.Service) func(*netlab.Node) netip.AddrPort {
		return func(n *netlab.Node) netip.AddrPort { return addrPort(n.Addr, svc.Spec.Ports[0].NodePort) }
	}
	fixed := func(a netip.AddrPort) func(*netlab.Node) netip.AddrPort {
		return func(*netlab.Node) netip.AddrPort { return a }
	}
	probes := []probe{
		{"LB IP, externalTrafficPolicy Cluster", client, vip("cluster"), vips["cluster"]},
		{"NodePort, externalTrafficPolicy Cluster", client, nodePort(cluster), netip.Addr{}},
		{"LB IP, client inside loadBalancerSourceRanges", client, vip("ranges"), vips["ranges"]},
		{"LB IP, client outside loadBalancerSourceRanges", client2, vip("ranges"), vips["ranges"]},
		{"LB IP, client outside loadBalancerSourceRanges, Local with a local endpoint", client2, vip("ranges-local"), vips["ranges-local"]},
		{"LB IP, externalTrafficPolicy Local, no local endpoint", client, vip("no-local"), vips["no-local"]},
		{"LB IP, client inside loadBalancerSourceRanges, Local, no local endpoint", client, vip("ranges-no-local"), vips["ranges-no-local"]},
		{"LB IP, client outside loadBalancerSourceRanges, Local, no local endpoint", client2, vip("ranges-no-local"), vips["ranges-no-local"]},
		{"NodePort, externalTrafficPolicy Local, no local endpoint", client, nodePort(noLocal), netip.Addr{}},
		{"LB IP, externalTrafficPolicy Local, local endpoint", client, vip("has-local"), vips["has-local"]},
		{"LB IP, no endpoints", client, vip("empty"), vips["empty"]},
		{"NodePort, no endpoints", client, nodePort(empty), netip.Addr{}},
		{"externalIP", client, fixed(netip.AddrPortFrom(ext, 80)), ext},
		{"pod to the LB IP of a Local port without a local endpoint", pod, vip("no-local"), netip.Addr{}},
		{"pod to a ClusterIP without endpoints", pod, fixed(addrPort(clusterIP(empty), 80)), netip.Addr{}},
		{"pod to a ClusterIP, internalTrafficPolicy Local, no local endpoint", pod, fixed(addrPort(clusterIP(itp), 80)), netip.Addr{}},
	}
	// A probe's outcome through n. A difference is probed again (up to three times): a loaded
	// machine may lose a packet, a real difference stays.
	outcome := func(p probe, n *netlab.Node) string {
		if p.route.IsValid() {
			for _, c := range []*netlab.Host{e.client, e.client2} {
				e.route(c, p.route, n)
			}
		}
		from := p.from(n)
		r, err := e.request(from, "tcp", p.dst(n))
		return classify(r, err, from)
	}
	for _, p := range probes {
		var got [2]string
		for range 3 {
			got[0], got[1] = outcome(p, probed[0]), outcome(p, probed[1])
			if got[0] == got[1] {
				break
			}
		}
		t.Logf("%-72s portico %-24s kube-proxy %s", p.name, got[0], got[1])
		if got[0] != got[1] {
			t.Errorf("%s mode, %s: portico-agent on %s: %s; kube-proxy on %s: %s", e.mode, p.name, probed[0].Name, got[0], probed[1].Name, got[1])
		}
	}
}

// classify names a probe's outcome: served (with whether the backend saw the client's own
// address), refused, unreachable (the router's answer: the node forwarded it), dropped, or the
// error.
func classify(r netlab.Reply, err error, from *netlab.Host) string {
	var ne net.Error
	switch {
	case err == nil && r.Client.Addr() == from.Addr:
		return "served, source kept"
	case err == nil:
		return "served, source rewritten"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EACCES):
		return "unreachable (forwarded on)"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "dropped"
	default:
		return strings.ReplaceAll(err.Error(), from.Name, "client")
	}
}
