package nodes

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestDualStackIPv6First: a dual-stack cluster with IPv6 primary, as the conformance IPv6
// columns run it: the kubernetes Service is IPv6 (e2e.test's cluster family), each Node has
// its InternalIPs and pod CIDRs IPv6 first, each pod gets an IPv6 and an IPv4 address from its
// node's ranges (IPv6 first), answers another node over both families with the client's
// address kept, and CoreDNS (reaching the apiserver over IPv6) answers AAAA for the cluster's
// names, with kube-dns at DNSServiceIP6.
func TestDualStackIPv6First(t *testing.T) {
	c := New(t, Options{Nodes: 2, DNS: true, IPFamilies: DualStackIPv6})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cs := c.Client()
	t.Logf("dual-stack cluster (IPv6 first) of %d nodes started in %s", len(c.Nodes), c.Started.Round(time.Millisecond))

	kube, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := netip.MustParseAddr(kube.Spec.ClusterIP); !netip.MustParsePrefix(cluster.ServiceCIDR6).Contains(ip) {
		t.Errorf("kubernetes Service ClusterIP %s, want one in %s", ip, cluster.ServiceCIDR6)
	}
	for _, n := range c.Nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var internal []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if want := strings.Split(joinAddrs(n.Addrs()), ","); !slices.Equal(internal, want) {
			t.Errorf("%s: InternalIPs %v, want %v", n.Name, internal, want)
		}
		if want := strings.Split(joinAddrs(n.PodCIDRs()), ","); !slices.Equal(node.Spec.PodCIDRs, want) {
			t.Errorf("%s: podCIDRs %v, want %v", n.Name, node.Spec.PodCIDRs, want)
		}
	}

	wait.For(t, time.Minute, "the default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, c.EchoDeployment(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	wait.For(t, 2*time.Minute, "2 echo pods Ready with two IPs", func() error {
		pl, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		pods = pl.Items
		for _, p := range pods {
			if !PodReady(&p) || len(p.Status.PodIPs) != 2 {
				return fmt.Errorf("pod %s: Ready %v, IPs %v", p.Name, PodReady(&p), p.Status.PodIPs)
			}
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d pods", len(pods))
		}
		return nil
	})
	for _, p := range pods {
		on := c.Node(p.Spec.NodeName)
		from := c.Nodes[0]
		if from == on {
			from = c.Nodes[1]
		}
		for i, f := range c.IPFamilies() {
			ip := netip.MustParseAddr(p.Status.PodIPs[i].IP)
			if !on.PodCIDRs()[i].Contains(ip) {
				t.Errorf("pod %s on %s: %s IP %s outside the node's pod CIDR %s", p.Name, on.Name, f, ip, on.PodCIDRs()[i])
				continue
			}
			reply, err := from.Lab.Request(ctx, "tcp", netip.AddrPortFrom(ip, EchoPort))
			if err != nil {
				t.Fatalf("%s to pod %s at %s: %v", from.Name, p.Name, ip, err)
			}
			if reply.Server != p.Name || reply.Client.Addr() != from.Addr(f) {
				t.Errorf("%s asked pod %s at %s: reply from %q seeing %s, want %q seeing %s", from.Name, p.Name, ip, reply.Server, reply.Client, p.Name, from.Addr(f))
			}
		}
	}

	// CoreDNS, asked at its IPv6 pod IP (no service proxy runs), answers AAAA.
	dnsPod, err := c.DNSPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !dnsPod.Is6() {
		t.Errorf("CoreDNS's pod IP %s, want IPv6 first", dnsPod)
	}
	from := c.Nodes[0].Lab
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if strings.HasPrefix(network, "tcp") {
			return from.DialTCP(ctx, netip.AddrPortFrom(dnsPod, 53))
		}
		return from.DialUDP(ctx, netip.AddrPortFrom(dnsPod, 53))
	}}
	for name, want := range map[string]string{
		"kubernetes.default.svc." + DNSDomain + ".":   kube.Spec.ClusterIP,
		"kube-dns.kube-system.svc." + DNSDomain + ".": DNSServiceIP6.String(),
	} {
		var got []net.IP
		wait.For(t, 30*time.Second, "CoreDNS to answer AAAA "+name, func() error {
			got, err = resolver.LookupIP(ctx, "ip6", name)
			return err
		})
		if len(got) != 1 || got[0].String() != want {
			t.Errorf("CoreDNS at %s answers AAAA %s with %v, want [%s]", dnsPod, name, got, want)
		}
	}
}
