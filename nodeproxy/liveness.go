package nodeproxy

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/nodeproxy/membership"
)

// startMembership starts the agents' membership and returns at once: it joins the agents of
// the other Nodes (peers.go: the Nodes that run one, their InternalIPs of the bind address's
// family) in the background, retried with back-off, keeps the peers up to date and the loop
// informed until ctx ends. Until they have joined (or the settle time has passed), the first
// syncs presume them alive (settling), so that the first election does not see this agent
// alone (it would win every VIP). The returned function leaves gracefully, or, when the agent
// exits to restart (a.exitHold), tells the others to keep this node meanwhile.
func (a *agent) startMembership(ctx context.Context, ev agentEvents) (func(), error) {
	cfg, err := a.membershipConfig(ctx)
	if err != nil {
		return nil, err
	}
	keyMetrics := newKeyMetrics(a.registry)
	cfg.DecryptFailed = a.newDecryptReporter(keyMetrics, ev).failed
	m, err := membership.Start(cfg)
	if err != nil {
		return nil, err
	}
	keyMetrics.setKeys(m.Keys())
	if ref := a.cfg.Membership.Secret; ref != "" {
		ns, name, _ := strings.Cut(ref, "/") // validated
		w := &keyWatch{namespace: ns, name: name, m: m, log: a.log.WithName("membership"), metrics: keyMetrics,
			invalid: func(err error) {
				if ev.recorder != nil {
					ev.recorder.Eventf(a.nodeRef(), nil, corev1.EventTypeWarning, reasonMembershipKeyInvalid, "ReadKeys",
						"node %s's agent keeps its membership keys: %v", a.cfg.NodeName, err)
				}
			}}
		go w.run(ctx, a.cs)
	}
	peers := func() []netip.Addr {
		var out []netip.Addr
		for _, ips := range a.peers(cfg.BindAddr) {
			out = append(out, ips...)
		}
		return out
	}
	a.membership = m
	m.SetPeers(peers()) // joins in the background
	a.log.Info("Started membership; joining the peers in the background", "bind", netip.AddrPortFrom(cfg.BindAddr, uint16(cfg.Port)), "peers", len(peers()))
	st := &settling{until: time.Now().Add(startupSettle), log: a.log.WithName("membership"),
		peers: func() []string { return slices.Sorted(maps.Keys(a.peers(cfg.BindAddr))) }}
	if !st.settled(time.Now(), m.Alive(), m.Dead()) {
		// The VIPs of the nodes whose agents never joined go to the others once it ends.
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(startupSettle):
				a.loop.requestUrgent()
			}
		}()
	}
	a.loop.liveness = func() (map[string]bool, map[string]bool) {
		dead := m.Dead()
		return st.view(time.Now(), m.Alive(), dead), dead
	}
	go a.followMembership(ctx, m, newMembershipMetrics(a.registry))
	// Nodes and agents come and go: keep the peer list current (membership joins the new ones).
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

// startupSettle bounds how long a starting agent presumes the agents of the other Nodes
// alive while they join (settling): longer than the few seconds in which a DaemonSet's pods
// start on a fresh install, short enough that the VIPs of a node whose agent never comes are
// taken over soon after.
const startupSettle = 5 * time.Second

// settling is the view of an agent that has just started, while the other agents join. An
// agent that starts first (a fresh install, a migration from another announcer) sees itself
// alone, and an election among the alive nodes alone would make it announce every VIP until
// the others join, moving each VIP twice (and resetting what was established through them).
// So until every other Node's agent (peers.go) has joined once (or left: dead), or until the
// settle time has passed, the nodes not heard from yet count as alive: each agent announces
// only the VIPs it wins among all nodes, and the VIPs of the others wait for their own agents.
// Joins run in the background, so this also covers an agent that restarts beside running
// agents: its first sync may come before its join (a few milliseconds on a LAN), and its
// settling ends once they have joined. Dead (leaving out endpoints) is never presumed.
type settling struct {
	until time.Time
	// peers names the other Nodes whose agents should join (peers.go).
	peers func() []string
	log   logr.Logger
	done  atomic.Bool
}

// view returns alive (which it may change) with the presumed nodes added while settling.
func (s *settling) view(now time.Time, alive, dead map[string]bool) map[string]bool {
	if s.done.Load() {
		return alive
	}
	presumed := s.presumed(alive, dead)
	if len(presumed) == 0 || !now.Before(s.until) {
		s.end(presumed)
		return alive
	}
	for _, n := range presumed {
		alive[n] = true
	}
	return alive
}

// settled reports whether settling has ended (and ends it when it should), logging the nodes
// it presumes alive meanwhile otherwise.
func (s *settling) settled(now time.Time, alive, dead map[string]bool) bool {
	if s.done.Load() {
		return true
	}
	presumed := s.presumed(alive, dead)
	if len(presumed) == 0 || !now.Before(s.until) {
		s.end(presumed)
		return true
	}
	s.log.Info("Counting the nodes of agents not joined yet as alive", "nodes", presumed, "until", s.until.Format(time.RFC3339Nano))
	return false
}

func (s *settling) presumed(alive, dead map[string]bool) []string {
	var out []string
	for _, n := range s.peers() {
		if !alive[n] && !dead[n] {
			out = append(out, n)
		}
	}
	return out
}

func (s *settling) end(missing []string) {
	if s.done.CompareAndSwap(false, true) {
		s.log.Info("Membership settled", "notJoined", missing)
	}
}

// membershipConfig is the member's configuration from the agent's: the bind address (the
// flag's, else the Node's first InternalIP) and the keys: from the Secret (read, or created
// when missing and allowed; membershipkeys.go), or the shared secret read from its file.
func (a *agent) membershipConfig(ctx context.Context) (membership.Config, error) {
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
	switch {
	case mc.SecretFile != "":
		var err error
		if cfg.SecretKey, err = membership.LoadSecretKey(mc.SecretFile); err != nil {
			return cfg, err
		}
	case mc.Secret != "":
		ns, name, _ := strings.Cut(mc.Secret, "/") // validated
		var owner *metav1.OwnerReference
		if mc.CreateSecret {
			owner = a.keySecretOwner(ctx, ns)
		}
		s, created, err := ensureKeySecret(ctx, a.cs, ns, name, a.cfg.NodeName, mc.CreateSecret, owner)
		if err != nil {
			return cfg, err
		}
		k, err := keysFromSecret(s)
		if err != nil {
			return cfg, err
		}
		if created {
			a.log.Info("Created the membership Secret with a random key", "secret", mc.Secret)
		}
		a.log.Info("Read the membership keys", "secret", mc.Secret, "resourceVersion", s.ResourceVersion, "dataKeys", k.names, "fingerprints", k.fingerprints())
		cfg.SecretKey, cfg.ExtraKeys = k.primary, k.extra
	}
	return cfg, nil
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
