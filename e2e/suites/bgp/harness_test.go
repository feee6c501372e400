package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/internal/prereq"
)

const (
	namespace = "bgp"
	echoPort  = 8080
	poolV4    = "198.18.230.0/28"
	poolV6    = "fd00:c613:ff02::200/124"
	routerASN = 64600
	nodeASN   = 64700
	password  = "s3cret-md5"
)

var shared struct {
	labcluster.Suite
	*labcluster.Env // lab, control plane, controller
	bird            *router.Bird
	outside         *router.Outside // the client behind the router

	mu     sync.Mutex
	agents map[string]*netlab.Process
	pods   map[string]*netlab.Pod // node -> its backend pod
}

func TestMain(m *testing.M) {
	shared.Main(m, func() error {
		shared.mu.Lock()
		for _, p := range shared.agents {
			_ = p.Stop()
		}
		shared.mu.Unlock()
		if shared.bird != nil {
			_ = shared.bird.Stop()
		}
		return shared.Env.Close()
	})
}

func setup(tb testing.TB) {
	tb.Helper()
	shared.Setup(tb, start, prereq.IPRoute2, prereq.IPTables, prereq.Bird2)
}

// routerHost is the router's namespace: the lab's client1, on the LAN with the nodes.
func routerHost() *netlab.Host { return shared.Lab.Clients()[0] }

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	shared.Env, err = labcluster.Start(ctx, "portico-e2e-bgp-", filepath.Join("..", "..", "..", "deploy", "crds"), namespace, "kube-system")
	if err != nil {
		return err
	}
	shared.agents, shared.pods = map[string]*netlab.Process{}, map[string]*netlab.Pod{}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bgp-password", Namespace: "kube-system"},
		Data: map[string][]byte{"password": []byte(password)}}
	if _, err := shared.CS.CoreV1().Secrets("kube-system").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return err
	}
	lp := int64(150)
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "routed"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{poolV4, poolV6}, Announce: v1alpha1.Announce{BGP: &v1alpha1.BGPAnnounce{
			Communities: []string{"64700:100"}, LargeCommunities: []string{"64700:1:2"}, LocalPreference: &lp}}}}
	if err := shared.CL.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating pool: %w", err)
	}
	if err := startBird(ctx); err != nil {
		return err
	}
	for _, addr := range []netip.Addr{routerHost().Addr, routerHost().Addr6} {
		if err := shared.CL.Create(ctx, bgpPeer(peerName(addr), addr, "bgp-password")); err != nil {
			return fmt.Errorf("creating BGPPeer: %w", err)
		}
	}
	for _, n := range shared.Lab.Nodes() {
		if err := startAgent(n); err != nil {
			return err
		}
	}
	return nil
}

func peerName(a netip.Addr) string {
	if a.Is4() {
		return "router-v4"
	}
	return "router-v6"
}

// bgpPeer is the BGPPeer of the router at addr, with BFD 100 ms x 3 and the password in secret.
func bgpPeer(name string, addr netip.Addr, secret string) *v1alpha1.BGPPeer {
	ms := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	return &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BGPPeerSpec{
		PeerAddress: addr.String(), PeerASN: routerASN, MyASN: nodeASN, Port: 179,
		HoldTime: ms(9 * time.Second), KeepaliveTime: ms(3 * time.Second),
		PasswordSecretRef: &v1alpha1.SecretKeyRef{Namespace: "kube-system", Name: secret, Key: "password"},
		BFD:               &v1alpha1.BFDSettings{ReceiveInterval: ms(100 * time.Millisecond), TransmitInterval: ms(100 * time.Millisecond), Multiplier: 3},
	}}
}

// startBird runs bird2 on the router with an IPv4 and an IPv6 session to every node, each
// with BFD and the MD5 password, and the client behind the router.
func startBird(ctx context.Context) error {
	var ns []router.Neighbor
	for i, n := range shared.Lab.Nodes() {
		ns = append(ns,
			router.Neighbor{Name: fmt.Sprintf("n%d_4", i), Addr: n.Addr, ASN: nodeASN, Password: password, BFD: true},
			router.Neighbor{Name: fmt.Sprintf("n%d_6", i), Addr: n.Addr6, ASN: nodeASN, Password: password, BFD: true})
	}
	var err error
	shared.bird, err = router.Start(ctx, routerHost(), shared.Dir, router.Config{ASN: routerASN, Neighbors: ns, HashPorts: true})
	if err != nil {
		return err
	}
	shared.outside, err = router.AddOutside(ctx, shared.Lab, routerHost(), netip.MustParsePrefix(poolV4), netip.MustParsePrefix(poolV6))
	if err != nil {
		return err
	}
	var nodes []*netlab.Host
	for _, n := range shared.Lab.Nodes() {
		nodes = append(nodes, &n.Host)
	}
	return shared.outside.RouteBack(ctx, nodes...)
}

// waitHops waits until the next hops for v's host route are want in bird's table and in the
// router's kernel (what traffic meets), and returns bird's `show route ... all`.
func waitHops(tb testing.TB, v netip.Addr, want []netip.Addr, within time.Duration) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	out, err := shared.bird.WaitNextHops(ctx, netip.PrefixFrom(v, v.BitLen()), want)
	if err != nil {
		dumpBGP(tb)
		tb.Fatal(err)
	}
	return out
}

func startAgent(n *netlab.Node) error {
	var cidrs []string
	for _, o := range shared.Lab.Nodes() {
		cidrs = append(cidrs, o.PodCIDR.String(), o.PodCIDR6.String())
	}
	p, err := n.Start(shared.Agent, "--kubeconfig="+shared.Kubeconfig, "--hostname-override="+n.Name,
		"--iptables-sync-period=30s", "--iptables-min-sync-period=100ms",
		"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=0.0.0.0:10249",
		"--cluster-cidr="+strings.Join(cidrs, ","), "--announce=bgp", "-v=1",
		// Withdraw at every stop, as "graceful shutdown withdraws before exit" checks; graceful
		// restart (the default 30s) is nodeproxy/announce/bgp's TestGracefulRestart and the
		// install suite's TestInstallBGP.
		"--bgp-graceful-restart=0")
	if err != nil {
		return err
	}
	shared.mu.Lock()
	shared.agents[n.Name] = p
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return p.WaitFor(ctx, `"Synced"`)
}

var backendsOnce sync.Once

// backends adds a pod labelled app=web to every node (once; the pods and their API objects
// stay) and runs an echo server in each for tb (StartEchoServer stops it when tb ends). Call
// it once per test.
func backends(tb testing.TB) {
	backendsOnce.Do(func() {
		for _, n := range shared.Lab.Nodes() {
			p := n.AddPod(tb, "web-"+n.Name)
			createPod(tb, n.Name, p)
			shared.pods[n.Name] = p
		}
	})
	for _, n := range shared.Lab.Nodes() {
		shared.pods[n.Name].StartEchoServer(tb, "tcp", echoPort)
	}
}

// createService creates a dual-stack LoadBalancer Service asking for ips and waits for them.
func createService(tb testing.TB, name string, ips []netip.Addr, mutate func(*corev1.Service)) {
	var want []string
	for _, ip := range ips {
		want = append(want, ip.String())
	}
	svc := services.LoadBalancer(namespace, name, func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = strings.Join(want, ",")
		s.Spec.Selector = map[string]string{"app": "web"}
		policy := corev1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: echoPort, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP}}
		if mutate != nil {
			mutate(s)
		}
	})
	h := services.Helper{TB: tb, CS: shared.CS, Namespace: namespace, Timeout: 30 * time.Second}
	h.CreateTemp(svc)
	h.Wait(name, "ingress "+strings.Join(want, ","), services.HasIngressIPs(ips...))
}

func secretWith(name, pw string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Data: map[string][]byte{"password": []byte(pw)}}
}

// createPod creates the API object of the backend pod p on node.
func createPod(tb testing.TB, node string, p *netlab.Pod) {
	tb.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + node, Namespace: namespace, Labels: map[string]string{"app": "web"}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo"}}
	if _, err := shared.Cluster.CreateReadyPod(context.Background(), pod, node, p.Addr, p.Addr6); err != nil {
		tb.Fatal(err)
	}
}

// dumpBGP logs bird's view of its sessions and the BGP lines of each agent's log, for a test
// that failed waiting for a session.
func dumpBGP(tb testing.TB) {
	out, _ := shared.bird.Birdc(context.Background(), "show", "protocols", "all")
	tb.Logf("birdc show protocols all:\n%s", out)
	out, _ = shared.bird.Birdc(context.Background(), "show", "bfd", "sessions")
	tb.Logf("birdc show bfd sessions:\n%s", out)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for name, p := range shared.agents {
		var lines []string
		for _, l := range strings.Split(p.Output(), "\n") {
			if strings.Contains(l, "BGP") || strings.Contains(l, "bgp") || strings.Contains(l, "peer") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		tb.Logf("%s's agent, BGP lines:\n%s", name, strings.Join(lines, "\n"))
	}
}
