package nodeproxy

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/nodeproxy/membership"
)

// startMembership starts the agents' membership, joins the agents of the other Nodes (their
// InternalIPs of the bind address's family) before it returns, so that the first election
// sees them (alone in its view an agent would win every VIP), and keeps the peers up to date
// and the loop informed until ctx ends. The returned function leaves gracefully, or, when the
// agent exits to restart (a.exitHold), tells the others to keep this node meanwhile.
func (a *agent) startMembership(ctx context.Context) (func(), error) {
	cfg, err := a.membershipConfig()
	if err != nil {
		return nil, err
	}
	m, err := membership.Start(cfg)
	if err != nil {
		return nil, err
	}
	peers := func() []netip.Addr { return a.membershipPeers(cfg.BindAddr) }
	m.SetPeers(peers()) // blocks for the first join
	a.log.Info("Joined membership", "bind", netip.AddrPortFrom(cfg.BindAddr, uint16(cfg.Port)), "alive", len(m.Alive()))
	a.loop.liveness = func() (map[string]bool, map[string]bool) { return m.Alive(), m.Dead() }
	go a.followMembership(ctx, m, newMembershipMetrics(a.registry))
	// Nodes come and go: keep the peer list current. SetPeers joins the new ones and may block
	// for memberlist's TCP timeout on an unreachable peer, so it has a goroutine of its own:
	// view changes must reach the loop at once.
	go func() {
		tick := time.NewTicker(cfg.RejoinInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m.SetPeers(peers())
			}
		}
	}()
	return func() {
		if a.exitHold > 0 {
			if err := m.Restart(a.exitHold, membershipStopTimeout); err != nil {
				a.log.Error(err, "Telling membership of the restart")
			}
			return
		}
		if err := m.Stop(membershipStopTimeout); err != nil {
			a.log.Error(err, "Leaving membership")
		}
	}, nil
}

// membershipConfig is the member's configuration from the agent's: the bind address (the
// flag's, else the Node's first InternalIP) and the shared secret read from its file.
func (a *agent) membershipConfig() (membership.Config, error) {
	mc := a.cfg.Membership
	cfg := membership.Config{
		NodeName: a.cfg.NodeName,
		Port:     mc.Port,
		Timings: membership.Timings{ProbeInterval: mc.ProbeInterval, ProbeTimeout: mc.ProbeTimeout,
			SuspicionMult: mc.SuspicionMult, SuspicionMaxTimeoutMult: mc.SuspicionMaxTimeoutMult, GossipInterval: mc.GossipInterval},
		RejoinInterval: mc.RejoinInterval,
		Log:            a.log.WithName("membership"),
	}
	if mc.BindAddress != "" {
		cfg.BindAddr, _ = netip.ParseAddr(mc.BindAddress) // validated
	} else if ips := internalIPs(a.tracker.Store().Node()); len(ips) > 0 {
		cfg.BindAddr = ips[0]
	} else {
		return cfg, fmt.Errorf("membership: Node %s has no InternalIP; set --membership-bind-address", a.cfg.NodeName)
	}
	if mc.SecretFile != "" {
		var err error
		if cfg.SecretKey, err = membership.LoadSecretKey(mc.SecretFile); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// membershipPeers are the InternalIPs of every Node of bind's family: the agents to join.
func (a *agent) membershipPeers(bind netip.Addr) []netip.Addr {
	nodes, _ := a.tracker.Store().Nodes()
	var out []netip.Addr
	for _, n := range nodes {
		for _, ip := range internalIPs(n) {
			if ip.Is4() == bind.Is4() {
				out = append(out, ip)
			}
		}
	}
	return out
}

// followMembership turns every change of m's view into work for the loop until ctx ends: the
// Services with endpoints on nodes that died or came back are marked, and the sync is urgent.
func (a *agent) followMembership(ctx context.Context, m *membership.Membership, metrics *membershipMetrics) {
	metrics.observe(m)
	lastDead := m.Dead()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Changes():
			metrics.changes.Inc()
			metrics.observe(m)
			// Urgent before marking: a sync that starts on a mark must skip the limiter.
			a.loop.urgent.Store(true)
			dead := m.Dead()
			for _, key := range a.tracker.Store().ServicesWithEndpointsOn(symmetricDifference(lastDead, dead)) {
				a.tracker.Mark(key)
			}
			lastDead = dead
			a.loop.requestUrgent()
		}
	}
}

// symmetricDifference returns the names in exactly one of a and b.
func symmetricDifference(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for n := range a {
		if !b[n] {
			out[n] = true
		}
	}
	for n := range b {
		if !a[n] {
			out[n] = true
		}
	}
	return out
}

// internalIPs returns n's InternalIPs in order.
func internalIPs(n *corev1.Node) []netip.Addr {
	if n == nil {
		return nil
	}
	var out []netip.Addr
	for _, ad := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(ad.Address); err == nil && ad.Type == corev1.NodeInternalIP {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// membershipMetrics show the membership view.
type membershipMetrics struct {
	nodes   *prometheus.GaugeVec
	changes prometheus.Counter
}

func newMembershipMetrics(reg prometheus.Registerer) *membershipMetrics {
	m := &membershipMetrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricsPrefix + "membership_nodes",
			Help: "Nodes in this agent's membership view by state: alive, restarting (gone, held until back or their restart hold ends; counted as alive by elections), or dead (failed or left)."}, []string{"state"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: metricsPrefix + "membership_changes_total",
			Help: "Changes of this agent's membership view (joins, leaves, failures; bursts may coalesce)."}),
	}
	if reg != nil {
		reg.MustRegister(m.nodes, m.changes)
	}
	return m
}

func (mm *membershipMetrics) observe(m *membership.Membership) {
	held := len(m.Held())
	mm.nodes.WithLabelValues("alive").Set(float64(len(m.Alive()) - held))
	mm.nodes.WithLabelValues("restarting").Set(float64(held))
	mm.nodes.WithLabelValues("dead").Set(float64(len(m.Dead())))
}
