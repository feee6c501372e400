package l2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/nodeproxy/announce"
	"github.com/portico-lb/portico/nodeproxy/announce/election"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// ReasonAnnouncing is the reason of the Normal Event the new announcing node records on each
// Service holding a VIP when it takes the VIP over.
const ReasonAnnouncing = "L2Announcing"

// Setter is what the Consumer needs of an Announcer.
type Setter interface {
	Set(vips ...VIP) error
	Reannounce()
}

var _ Setter = (*Announcer)(nil)

// ConsumerOptions configure a Consumer.
type ConsumerOptions struct {
	Log logr.Logger
	// Announcer answers ARP/NDP for the VIPs this node wins.
	Announcer Setter
	// Classes are the Services whose VIPs are announced (announce.Classes).
	Classes announce.Classes
	// Recorder records the L2Announcing Events (nil: none).
	Recorder events.EventRecorder
	// Registerer takes the consumer's metrics (nil: none).
	Registerer prometheus.Registerer
	// Interfaces lists the interfaces to answer for vip on when its pool names none (nil:
	// LocalInterfaces).
	Interfaces func(vip netip.Addr, node *corev1.Node) ([]string, error)
	// AskReassert asks node's agent to announce its VIPs again (nil: nobody to ask): called
	// for the node that takes over a VIP this node withdraws. When this node had taken the VIP
	// from a node it counted dead that is back now, that node never stopped counting itself
	// the owner, and without a new announcement the clients that followed this node would keep
	// sending here until their neighbour entries expire, to be reset when they move back.
	AskReassert func(node string)
}

// Consumer is the layer-2 announcer's room in the agent's sync loop: on every sync it elects
// the announcing node of every VIP of an L2 pool, among the eligible nodes that match the
// pool's node selector and that membership sees alive, and hands the VIPs this node wins to
// the Announcer in one Set.
type Consumer struct {
	opts    ConsumerOptions
	metrics *consumerMetrics
	// winners is the last elected node per VIP ("" none), as this agent computed it.
	winners   map[netip.Addr]string
	lastAlive int
	// announced are the VIPs handed to the Announcer at the last sync.
	announced map[netip.Addr]bool
}

// NewConsumer returns a Consumer; it announces nothing until its first Sync.
func NewConsumer(opts ConsumerOptions) *Consumer {
	if opts.Interfaces == nil {
		opts.Interfaces = LocalInterfaces
	}
	return &Consumer{opts: opts, metrics: newConsumerMetrics(opts.Registerer), winners: map[netip.Addr]string{}}
}

// Name implements the sync loop's Consumer.
func (c *Consumer) Name() string { return "l2" }

// Sync implements the sync loop's Consumer. It recomputes every election on every sync (full
// or not): an election reads Nodes, pools and the membership view, which no Service change
// list covers, and costs one hash per candidate node and VIP.
func (c *Consumer) Sync(_ context.Context, st *tracker.State) error {
	targets, err := announce.Targets(st, c.opts.Classes)
	if err != nil {
		return err
	}
	nodes, err := st.Store.Nodes()
	if err != nil {
		return err
	}
	var alive func(string) bool
	if st.Alive != nil {
		alive = func(n string) bool { return st.Alive[n] }
	}
	var errs []error
	var mine []VIP
	winners := map[netip.Addr]string{}
	var taken []takeover
	var held []netip.Addr // won, but new to this node in a sync whose rules failed
	for _, t := range targets {
		if t.Pool == nil || t.Pool.Spec.Announce.L2 == nil {
			continue
		}
		sel, err := nodeSelector(t.Pool.Spec.Announce.L2)
		if err != nil {
			// The pool controller reports the pool invalid; announcing from a node the
			// selector may have meant to exclude would be worse than not at all.
			errs = append(errs, fmt.Errorf("pool %s: %w", t.Pool.Name, err))
			continue
		}
		w, _ := election.Winner(election.Input{VIP: t.VIP, Nodes: nodes, Alive: alive, NodeSelector: sel,
			LocalOnly: t.LocalOnly, WithEndpoints: t.WithEndpoints})
		if w == st.NodeName && st.RulesFailed && !c.announced[t.VIP] {
			// Won now, but the rules may not have it: it waits for a sync that programs them
			// (until then this node is recorded as what it was, so that sync counts the
			// takeover).
			held = append(held, t.VIP)
			if prev, known := c.winners[t.VIP]; known {
				winners[t.VIP] = prev
			}
			continue
		}
		winners[t.VIP] = w
		if w != st.NodeName {
			continue
		}
		ifaces := t.Pool.Spec.Announce.L2.Interfaces
		if len(ifaces) == 0 {
			if ifaces, err = c.opts.Interfaces(t.VIP, st.Node); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		mine = append(mine, VIP{Addr: t.VIP, Interfaces: ifaces})
		if prev, known := c.winners[t.VIP]; !known || prev != w {
			taken = append(taken, takeover{target: t, prev: prev})
		}
	}
	if len(held) > 0 {
		c.opts.Log.Info("Not announcing VIPs new to this node until its rules are programmed", "vips", held)
	}
	if err := c.opts.Announcer.Set(mine...); err != nil {
		errs = append(errs, err)
	}
	c.announced = map[netip.Addr]bool{}
	for _, v := range mine {
		c.announced[v.Addr] = true
	}
	// A view that grew may be a healed partition: clients that followed the other side's
	// announcements come back with a new round.
	if st.Alive != nil {
		if len(st.Alive) > c.lastAlive && c.lastAlive > 0 && len(mine) > 0 {
			c.opts.Announcer.Reannounce()
		}
		c.lastAlive = len(st.Alive)
	}
	asked := map[string]bool{}
	for vip, prev := range c.winners {
		next := winners[vip]
		if prev != st.NodeName || next == st.NodeName {
			continue
		}
		c.opts.Log.Info("Withdrawing VIP", "vip", vip, "next", next)
		if next != "" && c.opts.AskReassert != nil && !asked[next] {
			asked[next] = true
			c.opts.AskReassert(next)
		}
	}
	c.winners = winners
	c.tookOver(st.NodeName, taken)
	c.metrics.announced.Reset()
	for _, v := range mine {
		c.metrics.announced.WithLabelValues(v.Addr.String()).Set(1)
	}
	return errors.Join(errs...)
}

// takeover is a VIP this node started announcing in a sync, and who announced it before ("":
// nobody, or unknown).
type takeover struct {
	target announce.Target
	prev   string
}

// tookOver records the VIPs this node started announcing: a metric for each taken from
// another node, a log line each, and one Normal Event per Service listing its VIPs (only the
// new announcer records it, so there is one per change; one per Service because the events
// library folds Events that differ only in their note into a series, counting repeats).
func (c *Consumer) tookOver(me string, taken []takeover) {
	notes := map[types.NamespacedName][]string{}
	var keys []types.NamespacedName
	for _, tk := range taken {
		was := "none"
		if tk.prev != "" {
			was = tk.prev
			c.metrics.takeovers.Inc()
		}
		c.opts.Log.Info("Announcing VIP", "vip", tk.target.VIP, "previous", was)
		for _, key := range tk.target.Services {
			if notes[key] == nil {
				keys = append(keys, key)
			}
			notes[key] = append(notes[key], fmt.Sprintf("%s by %s (previously: %s)", tk.target.VIP, protocolOf(tk.target.VIP), was))
		}
	}
	if c.opts.Recorder == nil {
		return
	}
	// The announcing Node is the related object: Events of different announcers stay apart
	// (the events library folds Events with the same regarding, related, reason and action).
	node := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: me}
	for _, key := range keys {
		ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: key.Namespace, Name: key.Name}
		c.opts.Recorder.Eventf(ref, node, corev1.EventTypeNormal, ReasonAnnouncing, "Announce",
			"node %s announces %s", me, strings.Join(notes[key], ", "))
	}
}

func protocolOf(a netip.Addr) string {
	if a.Is4() {
		return "ARP"
	}
	return "NDP"
}

func nodeSelector(l2 *v1alpha1.L2Announce) (labels.Selector, error) {
	if l2.NodeSelector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(l2.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.announce.l2.nodeSelector: %w", err)
	}
	return sel, nil
}

// LocalInterfaces returns the interfaces (up, not loopback) holding an address whose subnet
// contains vip; when none does, the interface holding node's InternalIP of vip's family. It
// reads the network namespace it runs in.
func LocalInterfaces(vip netip.Addr, node *corev1.Node) ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	var nodeIPs []netip.Addr
	if node != nil {
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() == vip.Is4() {
				nodeIPs = append(nodeIPs, ip)
			}
		}
	}
	var subnet, holding []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			p, err := netip.ParsePrefix(ipn.String())
			if err != nil {
				continue
			}
			if p.Contains(vip) && !slices.Contains(subnet, ifc.Name) {
				subnet = append(subnet, ifc.Name)
			}
			if slices.Contains(nodeIPs, p.Addr().Unmap()) && !slices.Contains(holding, ifc.Name) {
				holding = append(holding, ifc.Name)
			}
		}
	}
	switch {
	case len(subnet) > 0:
		return subnet, nil
	case len(holding) > 0:
		return holding, nil
	}
	return nil, fmt.Errorf("no interface on the subnet of %s nor holding the node's InternalIP; set spec.announce.l2.interfaces", vip)
}

type consumerMetrics struct {
	announced *prometheus.GaugeVec
	takeovers prometheus.Counter
}

func newConsumerMetrics(reg prometheus.Registerer) *consumerMetrics {
	m := &consumerMetrics{
		announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_agent_l2_announced", Help: "1 for each VIP this node answers ARP/NDP for."}, []string{"vip"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_agent_l2_takeovers_total", Help: "VIPs this node took over from another announcing node (failovers)."}),
	}
	if reg != nil {
		reg.MustRegister(m.announced, m.takeovers)
	}
	return m
}
