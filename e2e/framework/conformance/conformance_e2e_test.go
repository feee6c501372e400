package conformance

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestKubeProxyColumn: the pieces of a kube-proxy column work together: kube-proxy (nftables
// mode, from the built image) becomes Ready on every node, the agnhost image runs netexec, and
// the tester reaches a NodePort with externalTrafficPolicy Local from TesterAddr, which the
// pod sees unchanged.
func TestKubeProxyColumn(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 2, DNS: true, Router: true}) // fails or skips naming the fix
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bins, err := Build(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := BuildImages(ctx, t.TempDir(), bins, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		for _, img := range imgs.All() {
			if err := n.ImportImage(ctx, img.Archive); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), imgs.KubeProxy.Ref, NFTables, len(c.Nodes)); err != nil {
		t.Fatal(err)
	}
	tester, err := NewTester(ctx, c, ViaEveryNode)
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Client()
	labels := map[string]string{"app": "netexec"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: c.Nodes[1].Name,
			Containers: []corev1.Container{{
				Name: "netexec", Image: AgnhostRef, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:           []string{"netexec", "--http-port=8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "nc -h 2>&1 | grep -q OpenBSD && curl -sf http://127.0.0.1:8080/hostname"}}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Selector: labels, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := netip.AddrPortFrom(c.Nodes[1].Lab.Addr, uint16(svc.Spec.Ports[0].NodePort))
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return tester.DialTCP(ctx, target) },
	}}
	err = wait.Poll(ctx, time.Second, 3*time.Minute, fmt.Sprintf("netexec's /clientip through NodePort %s from the tester", target), func(ctx context.Context) error {
		resp, err := client.Get("http://" + target.String() + "/clientip")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(strings.TrimSpace(string(b))); host != TesterAddr.String() {
			return wait.Stop(fmt.Errorf("the pod saw %q, want %s", b, TesterAddr))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBGPColumnRouting: the Portico BGP+ECMP columns' set-up works, on the IPv4 cluster and
// on the IPv6-first one (whose Services, and so their VIPs, are IPv6): the chart's agents
// peer with the router's bird2, the router's kernel routes an externalTrafficPolicy Local
// VIP via exactly the nodes with a ready endpoint, the tester's connections reach the
// endpoint of every such node (the router spreads them by ECMP) with the tester's own source
// address, and a node that loses its endpoint leaves the route.
func TestBGPColumnRouting(t *testing.T) {
	for _, col := range []Column{PorticoBGPColumn, PorticoBGPIPv6Column} {
		t.Run(col.Short, func(t *testing.T) { testBGPColumnRouting(t, col) })
	}
}

func testBGPColumnRouting(t *testing.T, col Column) {
	c := nodes.New(t, nodes.Options{Nodes: 2, Router: true, IPFamilies: col.Families()}) // fails or skips naming the fix
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	routing, err := InstallPortico(t.Logf)(ctx, c, col)
	if err != nil {
		t.Fatal(err)
	}
	tester, err := NewTester(ctx, c, routing)
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Client()
	dep, err := cs.AppsV1().Deployments("default").Create(ctx, c.EchoDeployment(2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: dep.Spec.Selector.MatchLabels,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(nodes.EchoPort)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vip netip.Addr
	err = wait.Poll(ctx, 200*time.Millisecond, 3*time.Minute, "an ingress IP for Service echo", func(ctx context.Context) error {
		s, err := cs.CoreV1().Services("default").Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress")
		}
		vip, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The node addresses and the tester's source of the VIP's family.
	nodeAddr, src := func(n *nodes.Node) netip.Addr { return n.Lab.Addr }, TesterAddr
	if col.IPv6 {
		nodeAddr, src = func(n *nodes.Node) netip.Addr { return n.Lab.Addr6 }, tester.Addr6
	}
	if vip.Is6() != col.IPv6 {
		t.Fatalf("VIP %s: want the cluster's primary family", vip)
	}
	hops := func(want ...netip.Addr) {
		t.Helper()
		slices.SortFunc(want, netip.Addr.Compare)
		err := wait.Poll(ctx, 100*time.Millisecond, 3*time.Minute, fmt.Sprintf("the router's kernel routes %s via %v", vip, want), func(context.Context) error {
			got, err := router.KernelNextHops(c.Lab.Router(), netip.PrefixFrom(vip, vip.BitLen()))
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("next hops %v", got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	hops(nodeAddr(c.Nodes[0]), nodeAddr(c.Nodes[1]))

	// Every node's own endpoint answers: the router spread the tester's connections.
	seen := map[string]bool{}
	target := netip.AddrPortFrom(vip, 80)
	err = wait.Poll(ctx, 50*time.Millisecond, 2*time.Minute, "replies from both echo pods through "+target.String(), func(ctx context.Context) error {
		r, err := tester.Request(ctx, "tcp", target)
		if err != nil {
			return err
		}
		if r.Client.Addr() != src {
			return wait.Stop(fmt.Errorf("the pod saw the client %s, want %s", r.Client, src))
		}
		seen[r.Server] = true
		if len(seen) < 2 {
			return fmt.Errorf("replies from %v", seen)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// One endpoint left: only its node stays a next hop.
	scale, err := cs.AppsV1().Deployments("default").GetScale(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 1
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(ctx, dep.Name, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var left netip.Addr
	err = wait.Poll(ctx, 200*time.Millisecond, 2*time.Minute, "one echo pod left", func(ctx context.Context) error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		for _, n := range c.Nodes {
			if n.Name == pods.Items[0].Spec.NodeName {
				left = nodeAddr(n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hops(left)
}
