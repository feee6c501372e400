package install

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/traffic"
)

const (
	// bgpPool is the BGP AddressPool's addresses (the range test clusters keep for load
	// balancers); the client behind the router reaches them through it.
	bgpPool = "198.18.226.0/28"
	// The router's and the nodes' AS numbers.
	bgpRouterASN = 64512
	bgpNodeASN   = 64513
)

// TestInstallBGP is the install story with BGP: helm install on a cluster without kube-proxy,
// the agents announcing the pool to a bird2 router (graceful restart helper, its default), a
// LoadBalancer Service reached from a client behind the router (ECMP over the three nodes),
// helm upgrade under traffic (the agents restart with BGP graceful restart: the router keeps
// every node's route throughout), a node joining after the install and announcing too, helm
// uninstall leaving no rules on any node and no route at the router. The agents run the
// iptables mode here (TestInstall runs the default, nftables), so that the uninstall is seen
// to clean both.
func TestInstallBGP(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 3, Spare: 1, DNS: true, Router: true})
	ctx := t.Context()
	t.Logf("cluster of %d nodes with CoreDNS started in %s", len(c.Nodes), c.Started.Round(time.Millisecond))

	// The router: bird peering with every node (no BFD: see docs/baremetal.md on BFD and graceful
	// restart), spreading flows over the nodes by port, and a client behind it. Its neighbours
	// are every lab node, the spare one (added later) too, as a router configured for the
	// rack.
	rh := c.Lab.Router()
	var neighbors []router.Neighbor
	var nodeHosts []*netlab.Host
	var nodeAddrs []netip.Addr
	for _, ln := range c.Lab.Nodes() {
		neighbors = append(neighbors, router.Neighbor{Name: ln.Name, Addr: ln.Addr, ASN: bgpNodeASN})
	}
	for _, n := range c.Nodes {
		nodeHosts, nodeAddrs = append(nodeHosts, &n.Lab.Host), append(nodeAddrs, n.Lab.Addr)
	}
	slices.SortFunc(nodeAddrs, netip.Addr.Compare)
	bird, err := router.Start(ctx, rh, t.TempDir(), router.Config{ASN: bgpRouterASN, Neighbors: neighbors, HashPorts: true})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := router.AddOutside(ctx, c.Lab, rh, netip.MustParsePrefix(bgpPool))
	if err != nil {
		t.Fatal(err)
	}
	if err := outside.RouteBack(ctx, nodeHosts...); err != nil {
		t.Fatal(err)
	}

	tag, err := install.DefaultTag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := install.BuildImages(ctx, tag, t.Logf); err != nil {
		t.Fatal(err)
	}

	// The workload: three echo pods behind a LoadBalancer Service.
	svcs, _ := echoWorkload(t, c)

	begin := time.Now()
	vals := map[string]any{
		"bgpPeers": []any{map[string]any{"name": "router", "spec": map[string]any{
			"peerAddress": rh.Addr.String(), "peerASN": bgpRouterASN, "myASN": bgpNodeASN,
		}}},
	}
	// PORTICO_INSTALL_BGP_GR overrides agent.bgpGracefulRestart, e.g. 0s to see what the
	// upgrade does without graceful restart (the route assertions then fail).
	if gr := os.Getenv("PORTICO_INSTALL_BGP_GR"); gr != "" {
		vals["agent"] = map[string]any{"bgpGracefulRestart": gr}
		t.Logf("agent.bgpGracefulRestart: %s (PORTICO_INSTALL_BGP_GR)", gr)
	}
	r := install.Must(t, c, install.Options{Tag: tag, ProxyMode: "iptables", Announce: []string{"bgp"}, Pool: netip.MustParsePrefix(bgpPool), Values: vals})
	t.Logf("helm install to release ready: %s", time.Since(begin).Round(time.Millisecond))

	_, vip := waitVIP(t, svcs, netip.MustParsePrefix(bgpPool))
	prefix := netip.PrefixFrom(vip, 32)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if out, err := bird.WaitNextHops(rctx, prefix, nodeAddrs); err != nil {
		cancel()
		t.Fatalf("the router's routes for %s: want every node %v: %v\n%s", vip, nodeAddrs, err, out)
	}
	cancel()
	target := netip.AddrPortFrom(vip, nodes.EchoPort)
	reply := firstReply(t, &outside.Host, target, "the client behind the router")
	t.Logf("install to the first request served from behind the router through %s (answered by %s): %s", vip, reply.Server, time.Since(begin).Round(time.Millisecond))

	t.Run("upgrade under traffic", func(t *testing.T) {
		next := tag + "-next"
		// The new images first (built once per source version), so that the upgrade's time
		// is the import, helm upgrade and the rollout.
		if _, err := install.BuildImages(ctx, next, t.Logf); err != nil {
			t.Fatal(err)
		}
		load := traffic.Start(t, &outside.Host, target, traffic.Options{Held: 4})
		load.WaitRounds(t, 5, "traffic flowing before the upgrade")
		watch := router.WatchNextHops(bird, prefix, nodeAddrs, 20*time.Millisecond)
		upgraded := time.Now()
		if err := r.Upgrade(ctx, next, nil); err != nil {
			t.Fatal(err)
		}
		took := time.Since(upgraded)
		load.WaitRounds(t, 5, "traffic flowing after the upgrade")
		polls, gaps := watch.Stop()
		res := load.Stop()
		t.Logf("helm upgrade to %s (images imported on every node, every agent and controller replaced and Ready): %s", next, took.Round(time.Millisecond))
		t.Logf("during the upgrade: %d requests on new connections (%d failed, longest failed window %s), %d on held connections, %d held connections reset; the router's routes polled %d times, %d times not every node",
			res.NewRequests, res.FailedNew, res.LongestFailure, res.OnHeld, len(res.Resets), polls, len(gaps))
		for _, r := range res.Resets {
			t.Logf("reset in the upgrade: %s", r)
		}
		if len(res.Failed) > 0 {
			t.Errorf("%d requests on new connections failed during the upgrade, e.g. %s", len(res.Failed), strings.Join(res.Failed[:min(5, len(res.Failed))], "; "))
		}
		if len(gaps) > 0 {
			t.Errorf("the router lost a node's route during the upgrade (graceful restart should keep it): %s", strings.Join(gaps[:min(5, len(gaps))], "; "))
		}
		if polls < int(took/(200*time.Millisecond)) {
			t.Errorf("the route watch polled only %d times in %s (starved?)", polls, took)
		}
		after := svcs.Get("echo")
		if got := after.Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != vip.String() {
			t.Errorf("the VIP changed in the upgrade: ingress %+v, was %s", got, vip)
		}
	})

	t.Run("node added after install", func(t *testing.T) {
		n := lateNode(t, c, r)
		if err := outside.RouteBack(ctx, &n.Lab.Host); err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(nodeAddrs), n.Lab.Addr)
		slices.SortFunc(all, netip.Addr.Compare)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if out, err := bird.WaitNextHops(rctx, prefix, all); err != nil {
			t.Fatalf("the router's routes for %s: want every node %v, the added one too: %v\n%s", vip, all, err, out)
		}
		t.Logf("the router routes %s via all %d nodes, the added %s too", vip, len(all), n.Name)
	})

	t.Run("uninstall leaves nothing", func(t *testing.T) {
		// The Service stays: the uninstall itself must take the route away.
		agentLogs := followAgentLogs(t, c.Client(), r.Namespace)
		uninstalled := time.Now()
		if err := r.Uninstall(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Gone(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("helm uninstall (objects and pods gone) on %d nodes: %s", len(c.Nodes), time.Since(uninstalled).Round(time.Millisecond))
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if out, err := bird.WaitNextHops(rctx, prefix, nil); err != nil {
			t.Errorf("the router still routes %s after uninstall: %v\n%s", vip, err, out)
		} else {
			t.Logf("the router (bird and kernel) has no route for %s %s after the uninstall began", vip, time.Since(uninstalled).Round(time.Millisecond))
		}
		leftRules(t, c, agentLogs())
		leftovers(t, c, r)
		svcs.Delete("echo")
	})
}
