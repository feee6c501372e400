package announceonly

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// The BGP pool, routed by the lab's client (bird2, acting as the router) to the nodes that
// announce it, and the AS numbers.
const (
	routedPool = "198.18.223.0/28"
	routerASN  = 64600
	nodeASN    = 64700
)

// bgpLab is bird2 on the lab's client, peering with every node, and a client behind it.
var bgpLab struct {
	once    sync.Once
	err     error
	bird    *router.Bird
	outside *router.Outside
}

func setupBGP(tb testing.TB) {
	tb.Helper()
	prereq.RequireRoot(tb, prereq.Bird2)
	bgpLab.once.Do(func() { bgpLab.err = startBGP() })
	if bgpLab.err != nil {
		tb.Fatal(bgpLab.err)
	}
}

func startBGP() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rh := shared.Lab.Clients()[0]
	var ns []router.Neighbor
	var nodes []*netlab.Host
	for i, n := range shared.Lab.Nodes() {
		ns = append(ns, router.Neighbor{Name: fmt.Sprintf("n%d", i), Addr: n.Addr, ASN: nodeASN})
		nodes = append(nodes, &n.Host)
	}
	var err error
	if bgpLab.bird, err = router.Start(ctx, rh, shared.Dir, router.Config{ASN: routerASN, Neighbors: ns, HashPorts: true}); err != nil {
		return err
	}
	if bgpLab.outside, err = router.AddOutside(ctx, shared.Lab, rh, netip.MustParsePrefix(routedPool)); err != nil {
		return err
	}
	if err := bgpLab.outside.RouteBack(ctx, nodes...); err != nil {
		return err
	}
	pool := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "routed"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{routedPool}, Announce: v1alpha1.Announce{BGP: &v1alpha1.BGPAnnounce{}}}}
	if err := shared.CL.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating pool: %w", err)
	}
	peer := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}, Spec: v1alpha1.BGPPeerSpec{
		PeerAddress: rh.Addr.String(), PeerASN: routerASN, MyASN: nodeASN,
		HoldTime: &metav1.Duration{Duration: 9 * time.Second}, KeepaliveTime: &metav1.Duration{Duration: 3 * time.Second}}}
	if err := shared.CL.Create(ctx, peer); err != nil {
		return fmt.Errorf("creating BGPPeer: %w", err)
	}
	return nil
}

// TestBGPBesideKubeProxy (issue 29): portico-agent --proxy-mode=none --announce=bgp, without
// CAP_NET_ADMIN, beside kube-proxy in both of its modes: every node advertises a VIP of the
// BGP pool to the router (ECMP over the three), a client behind the router is served through
// it by kube-proxy's rules, and no node holds Portico's rules. On d6507e1 the agent refuses
// --proxy-mode=none.
func TestBGPBesideKubeProxy(t *testing.T) {
	setup(t)
	setupBGP(t)
	backends(t)
	var addrs []netip.Addr
	for _, n := range shared.Lab.Nodes() {
		addrs = append(addrs, n.Addr)
	}
	for i, mode := range kubeProxyModes {
		t.Run("kube-proxy "+mode, func(t *testing.T) {
			for _, n := range shared.Lab.Nodes() {
				startKubeProxy(t, n, mode)
			}
			for _, n := range shared.Lab.Nodes() {
				startAgent(t, n, false, "--proxy-mode=none", "--announce=bgp", "--bgp-graceful-restart=0")
			}
			h := services.Helper{TB: t, CS: shared.CS, Namespace: namespace, Timeout: time.Minute}
			vip := netip.MustParseAddr(fmt.Sprintf("198.18.223.%d", 2+i))
			createService(h, "routed-"+mode, vip, "web", corev1.ServiceExternalTrafficPolicyCluster)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if out, err := bgpLab.bird.WaitNextHops(ctx, netip.PrefixFrom(vip, 32), addrs); err != nil {
				t.Fatalf("the router's next hops for %s: %v\n%s", vip, err, out)
			}
			wait.For(t, time.Minute, "the client behind the router served through "+vip.String(), func() error {
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := bgpLab.outside.Request(rctx, "tcp", netip.AddrPortFrom(vip, echoPort))
				return err
			})
			t.Logf("%s: %s routed via %v and served", mode, vip, addrs)
			for _, n := range shared.Lab.Nodes() {
				if found := porticoRules(t, n); len(found) > 0 {
					t.Errorf("%s holds Portico's rules beside kube-proxy's: %v", n.Name, found)
				}
			}
		})
	}
}
