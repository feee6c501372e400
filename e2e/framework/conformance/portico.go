package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// The AS numbers of the BGP column: the lab's router and the nodes (eBGP).
const (
	RouterASN = 64600
	NodeASN   = 64700
)

// InstallPortico is the InstallProxy of the comparison. Every column gets Portico's chart
// (e2e/framework/install) with the controller's baremetal provider serving class-less
// Services from Pool, so that the LoadBalancer specs have the same LoadBalancer
// implementation everywhere. In Portico's column the agent is the service proxy and
// announces Pool by layer 2 (the router reaches it on the LAN), or with Column.BGP by BGP to
// the router's bird2 (StartRouterBGP), which routes each VIP by ECMP via the nodes that
// announce it. In a kube-proxy column kube-proxy is installed first (the controller reaches
// the apiserver through the kubernetes ClusterIP it programs), the chart without the agent
// and Pool without announcement, and the router reaches Pool by ECMP via every node. On a
// dual-stack cluster the pool also has Pool6 and the agents know the nodes' IPv6 pod CIDRs.
// In an Announcer column kube-proxy is installed first too and the chart's agents run
// announce-only (agent.mode none) beside it, announcing Pool by L2 (the router reaches it on
// the LAN) or with Column.BGP by BGP to the router's bird2, as in Portico's columns.
func InstallPortico(logf func(string, ...any)) InstallProxy {
	return func(ctx context.Context, c *nodes.Cluster, col Column) (PoolRouting, error) {
		opts := install.Options{Pool: Pool, Classless: true, Logf: logf}
		routing := OnLink
		if col.KubeProxy != "" {
			if err := InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), KubeProxyRef, col.KubeProxy, len(c.Nodes)); err != nil {
				return 0, err
			}
			if !col.Announcer {
				opts.NoAgent, opts.Announce, routing = true, []string{}, ViaEveryNode
			} else {
				opts.ProxyMode = "none"
			}
		}
		if col.BGP {
			bird, err := StartRouterBGP(ctx, c)
			if err != nil {
				return 0, err
			}
			opts.Announce, routing = []string{"bgp"}, ViaBGP
			// One BGPPeer per family of the cluster: the router's IPv4 address carries the
			// IPv4 VIPs, its IPv6 address the IPv6 ones.
			peers := []any{routerPeer("router", bird.Host.Addr)}
			if c.DualStack() {
				peers = append(peers, routerPeer("router-v6", bird.Host.Addr6))
			}
			opts.Values = map[string]any{"bgpPeers": peers}
			if c.DualStack() {
				opts.Values = dualStackValues(c, opts)
			}
			if _, err := install.Portico(ctx, c, opts); err != nil {
				return 0, err
			}
			return routing, WaitSessions(ctx, bird, c, 3*time.Minute)
		}
		if c.DualStack() {
			opts.Values = dualStackValues(c, opts)
		}
		_, err := install.Portico(ctx, c, opts)
		return routing, err
	}
}

// routerPeer is the chart's BGPPeer value for the lab router's address addr.
func routerPeer(name string, addr netip.Addr) map[string]any {
	return map[string]any{"name": name, "spec": map[string]any{
		"peerAddress": addr.String(), "peerASN": RouterASN, "myASN": NodeASN,
		"holdTime": "9s", "keepaliveTime": "3s",
	}}
}

// dualStackValues are the chart values that make the pool dual-stack (Pool and Pool6,
// announced as opts.Announce says) and give the agents both families' pod CIDRs, merged under
// opts.Values.
func dualStackValues(c *nodes.Cluster, opts install.Options) map[string]any {
	var cidrs []any
	for _, n := range c.Nodes {
		for _, p := range n.PodCIDRs() {
			cidrs = append(cidrs, p.String())
		}
	}
	announce := opts.Announce
	if announce == nil {
		announce = []string{"l2"}
	}
	ann := map[string]any{}
	for _, a := range announce {
		ann[a] = map[string]any{}
	}
	name := opts.PoolName
	if name == "" {
		name = install.DefaultPool
	}
	return install.Merge(map[string]any{
		"agent":        map[string]any{"clusterCIDRs": cidrs},
		"addressPools": []any{map[string]any{"name": name, "spec": map[string]any{"addresses": []any{Pool.String(), Pool6.String()}, "announce": ann}}},
	}, opts.Values)
}

// StartRouterBGP runs bird2 in the lab's router namespace (e2e/framework/router) with an
// IPv4 session to every node and, on a dual-stack cluster, an IPv6 session too (router AS
// RouterASN, nodes NodeASN, no password, no BFD). Its kernel protocols install a route with
// all of its next hops (merge paths), and the router's kernel spreads the flows to a VIP over
// every node that announces it by a layer-4 hash (router.Config.HashPorts: one tester
// address, many source ports). The lab stops bird when the cluster closes.
func StartRouterBGP(ctx context.Context, c *nodes.Cluster) (*router.Bird, error) {
	rt := c.Lab.Router()
	if rt == nil {
		return nil, fmt.Errorf("the BGP router needs the lab's router (nodes.Options.Router)")
	}
	var ns []router.Neighbor
	for i, n := range c.Nodes {
		ns = append(ns, router.Neighbor{Name: fmt.Sprintf("node%d", i+1), Addr: n.Lab.Addr, ASN: NodeASN})
		if c.DualStack() {
			ns = append(ns, router.Neighbor{Name: fmt.Sprintf("node%d_6", i+1), Addr: n.Lab.Addr6, ASN: NodeASN})
		}
	}
	b, err := router.Start(ctx, rt, c.Dir, router.Config{ASN: RouterASN, Neighbors: ns, HashPorts: true})
	if err != nil {
		return nil, fmt.Errorf("starting bird on the router: %w", err)
	}
	return b, nil
}

// WaitSessions waits until every session of bird (StartRouterBGP: one per node and family of
// c) is Established.
func WaitSessions(ctx context.Context, b *router.Bird, c *nodes.Cluster, within time.Duration) error {
	for _, n := range b.Config().Neighbors {
		name := n.Name
		err := wait.Poll(ctx, 200*time.Millisecond, within, "bird's session "+name+" with "+n.Addr.String()+" Established", func(ctx context.Context) error {
			st, err := b.ProtocolState(ctx, name)
			if err != nil {
				return err
			}
			if st != "Established" {
				return fmt.Errorf("state %s", st)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
