package main

// The bare-metal walk-through's BGP part: bird2 in the lab's router namespace peers with the
// agents, and a client behind the router reaches demo/web's VIP through the routes they
// announce (see the package comment).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
)

const (
	routerASN = 64512
	nodeASN   = 64513
)

// routerUnsupported says why the BGP part cannot run (bird2 missing), or returns nil.
func routerUnsupported() error {
	for _, bin := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (Debian package bird2; make prereqs installs it)", bin)
		}
	}
	return nil
}

// startRouter runs bird2 in the router namespace with a session (BFD 100 ms x 3) to each
// node, adds the client behind the router, and creates the BGPPeer the agents peer with.
func (d *demo) startRouter() error {
	l := d.lab
	rt := l.Router()
	var ns []router.Neighbor
	for _, n := range l.Nodes() {
		ns = append(ns, router.Neighbor{Name: n.Name, Addr: n.Addr, ASN: nodeASN, BFD: true})
	}
	step(fmt.Sprintf("Starting bird2 in the router namespace (%s, AS %d) and a client behind the router", rt.Addr, routerASN))
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	// HashPorts: one client's connections reach both nodes.
	bird, err := router.Start(ctx, rt, d.dir, router.Config{ASN: routerASN, Neighbors: ns, HashPorts: true})
	if err != nil {
		return err
	}
	d.bird = bird
	// The outside client reaches the LAN, VIPs included, only through the router; the nodes
	// send its replies back the same way.
	if d.outside, err = router.AddOutside(d.ctx, l, rt, l.LANPrefix()); err != nil {
		return err
	}
	var nodes []*netlab.Host
	for _, n := range l.Nodes() {
		nodes = append(nodes, &n.Host)
	}
	if err := d.outside.RouteBack(d.ctx, nodes...); err != nil {
		return err
	}
	fmt.Printf("  bird: one eBGP session per node (AS %d), BFD 100 ms x 3, hold time 9 s; routes go to the router's kernel with all next hops (ECMP)\n", nodeASN)
	fmt.Printf("  %-8s %-14s behind the router (namespace %s, link %s): routes %s via %s\n",
		d.outside.Name, d.outside.Addr, d.outside.NS, d.outside.Prefix4, l.LANPrefix(), d.outside.Gateway4)

	ms := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	peer := &v1alpha1.BGPPeer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BGPPeer"},
		ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Spec: v1alpha1.BGPPeerSpec{PeerAddress: rt.Addr.String(), PeerASN: routerASN, MyASN: nodeASN,
			HoldTime: ms(9 * time.Second), KeepaliveTime: ms(3 * time.Second),
			BFD: &v1alpha1.BFDSettings{ReceiveInterval: ms(100 * time.Millisecond), TransmitInterval: ms(100 * time.Millisecond), Multiplier: 3}},
	}
	step(fmt.Sprintf("Creating BGPPeer router (peerAddress %s, peerASN %d, myASN %d, BFD 100 ms x 3; every node)", rt.Addr, routerASN, nodeASN))
	return d.createObject("bgppeers", peer)
}

// routed waits until the router has learned vip from every node, prints its route (bird's
// and the kernel's) and sends requests from the client behind the router.
func (d *demo) routed(vip netip.Addr) error {
	var hops []netip.Addr
	for _, n := range d.lab.Nodes() {
		hops = append(hops, n.Addr)
	}
	step(fmt.Sprintf("The router learns %s from both agents by BGP; %s behind it sends TCP requests", vip, d.outside.Name))
	if err := d.showRoute(vip, hops); err != nil {
		return err
	}
	if err := d.peerStatus(); err != nil {
		return err
	}
	return d.sendRouted(vip)
}

// peerStatus waits until every node's agent reports its session to the router up with the
// VIP advertised (they write status every second) and prints the BGPPeer's status.
func (d *demo) peerStatus() error {
	dyn, err := dynamic.NewForConfig(d.c.Config())
	if err != nil {
		return err
	}
	var p v1alpha1.BGPPeer
	if err := waitFor(d.ctx, func() bool {
		u, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("bgppeers")).Get(d.ctx, "router", metav1.GetOptions{})
		if err != nil || runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p) != nil {
			return false
		}
		up := len(p.Status.Nodes) == len(d.lab.Nodes())
		for _, n := range p.Status.Nodes {
			up = up && n.Session == "Established" && n.AdvertisedPrefixes > 0
		}
		return up
	}); err != nil {
		return fmt.Errorf("BGPPeer router's status never showed every session up: %+v: %w", p.Status.Nodes, err)
	}
	fmt.Println("\n$ kubectl get bgppeer router -o jsonpath='{.status.nodes}'   (as a table)")
	fmt.Printf("%-6s %-12s %-4s %s\n", "NODE", "SESSION", "BFD", "ADVERTISED")
	for _, n := range p.Status.Nodes {
		fmt.Printf("%-6s %-12s %-4s %d\n", n.Node, n.Session, n.BFD, n.AdvertisedPrefixes)
	}
	return nil
}

// showRoute waits until bird's next hops for vip are want, then prints `birdc show route`
// and the router's kernel route.
func (d *demo) showRoute(vip netip.Addr, want []netip.Addr) error {
	prefix := netip.PrefixFrom(vip, 32)
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	out, err := d.bird.WaitNextHops(ctx, prefix, want)
	if err != nil {
		return err
	}
	fmt.Printf("\n$ ip netns exec %s birdc show route %s all   (abridged)\n", d.lab.Router().NS, prefix)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(line, "BIRD ") || strings.HasPrefix(t, "Type:") || strings.HasPrefix(t, "BGP.origin") ||
			strings.HasPrefix(t, "BGP.local_pref") {
			continue
		}
		fmt.Println(line)
	}
	kern, err := d.lab.Router().Exec(d.ctx, "ip", "route", "show", prefix.String())
	if err != nil {
		return err
	}
	fmt.Printf("\n$ ip netns exec %s ip route show %s\n%s", d.lab.Router().NS, prefix, kern)
	var names []string
	for _, h := range want {
		names = append(names, d.nodeAt(h))
	}
	fmt.Printf("The router forwards %s to %s (next hops from BGP; bird installed them in its kernel).\n", vip, strings.Join(names, " and "))
	return nil
}

// sendRouted sends the requests from the client behind the router and tallies which node the
// router sent each one to: with externalTrafficPolicy Cluster the agent masquerades, so the pod
// sees that node's address.
func (d *demo) sendRouted(vip netip.Addr) error {
	dst := netip.AddrPortFrom(vip, 80)
	if err := waitFor(d.ctx, func() bool {
		_, err := request(d.ctx, &d.outside.Host, dst)
		return err == nil
	}); err != nil {
		return fmt.Errorf("%s never answered %s behind the router: %w", dst, d.outside.Name, err)
	}
	via := map[string]int{}
	for i := 1; i <= requests; i++ {
		r, err := request(d.ctx, &d.outside.Host, dst)
		if err != nil {
			return err
		}
		node := d.nodeAt(r.Client.Addr())
		via[node]++
		fmt.Printf("  #%-2d from %s answered by pod %-13s; it saw the client as %s, so the router sent it via %s\n",
			i, d.outside.Addr, r.Server, r.Client, node)
	}
	var tally []string
	for _, n := range d.lab.Nodes() {
		tally = append(tally, fmt.Sprintf("via %s %d", n.Name, via[n.Name]))
	}
	fmt.Printf("%d of %d requests from behind the router served (%s).\n", requests, requests, strings.Join(tally, ", "))
	return nil
}

// routedFailover shows the router's route after node dead's agent was killed: its session
// ended with the process, so the route has only the other node left, and the client behind
// the router is still served.
func (d *demo) routedFailover(vip netip.Addr, dead string) error {
	var hops []netip.Addr
	for _, n := range d.lab.Nodes() {
		if n.Name != dead {
			hops = append(hops, n.Addr)
		}
	}
	step(fmt.Sprintf("The router withdrew %s's next hop: the killed agent's BGP session ended with it", dead))
	if err := d.showRoute(vip, hops); err != nil {
		return err
	}
	return d.sendRouted(vip)
}

// routeGone waits until the router has no route for vip any more.
func (d *demo) routeGone(vip netip.Addr) error {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	if _, err := d.bird.WaitNextHops(ctx, netip.PrefixFrom(vip, 32), nil); err != nil {
		return errors.New("the router still has a route after demo/web was deleted: " + err.Error())
	}
	fmt.Printf("The agents withdrew %s/32: `birdc show route %s/32` finds no network.\n", vip, vip)
	return nil
}

// nodeAt names the lab node with LAN address a ("?" when none has it).
func (d *demo) nodeAt(a netip.Addr) string {
	i := slices.IndexFunc(d.lab.Nodes(), func(n *netlab.Node) bool { return n.Addr == a })
	if i < 0 {
		return "?"
	}
	return d.lab.Nodes()[i].Name
}
