package netfilter

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/serviceports"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// This file is the part of a Proxier that does not depend on how rules reach the kernel, so
// both proxy modes use it (this package's iptables Proxier and package nftables'): the IP
// families programmed, what ServicePorts is told of the node (the externalIPs policy with it), the FamilySynced callback, the no-local-endpoints gauge, where NodePorts
// and so healthCheckNodePorts answer, and the stale UDP conntrack cleanup.

// FamilyOptions are the options of a Proxier that Families keeps, the same in both modes.
type FamilyOptions struct {
	// NodePortCIDRs restrict NodePorts to local addresses within them, of either family, and
	// NodePortPrimary adds the Node's primary IP of each family.
	NodePortCIDRs   []netip.Prefix
	NodePortPrimary bool
	// Conntrack deletes stale UDP entries after a sync; nil skips that.
	Conntrack Conntrack
	// FamilySynced is told the outcome of each family's part of every sync (nil: nobody).
	FamilySynced func(rules.Family, error)
	// ExternalIPs is the agent's externalIPs policy: refused addresses get no rule (zero
	// value: every address is programmed).
	ExternalIPs config.ExternalIPPolicy
}

// Families is the bookkeeping a Proxier keeps around its per-family syncs.
type Families struct {
	// States are the families' shared state, IPv4 first.
	States  []*FamilyState
	synced  func(rules.Family, error)
	metrics *FamilyMetrics
	opts    FamilyOptions // for the states of families added later (Set)
}

// NewFamilies returns the Families of the families listed in want (IPv4 first, whatever
// want's order), recording into m.
func NewFamilies(want []rules.Family, o FamilyOptions, m *FamilyMetrics) *Families {
	fs := &Families{synced: o.FamilySynced, metrics: m, opts: o}
	if fs.synced == nil {
		fs.synced = func(rules.Family, error) {}
	}
	fs.Set(want)
	return fs
}

// Set makes the families those listed in want (IPv4 first): a family kept keeps its state, a
// new one gets a fresh state (its first sync is full), a family not listed is dropped. It
// reports the families added and removed. The Proxier keeps its per-family state in step
// (States' order) and removes a dropped family's rules from the kernel.
func (fs *Families) Set(want []rules.Family) (added, removed []rules.Family) {
	var next []*FamilyState
	for _, fam := range []rules.Family{rules.IPv4, rules.IPv6} {
		i := slices.IndexFunc(fs.States, func(s *FamilyState) bool { return s.Family == fam })
		switch {
		case slices.Contains(want, fam) && i >= 0:
			next = append(next, fs.States[i])
		case slices.Contains(want, fam):
			added = append(added, fam)
			next = append(next, &FamilyState{
				Family:  fam,
				npCIDRs: FamilyPrefixes(fs.opts.NodePortCIDRs, fam), npPrimary: fs.opts.NodePortPrimary,
				ct: fs.opts.Conntrack, metrics: fs.metrics, extIPs: fs.opts.ExternalIPs,
			})
		case i >= 0:
			removed = append(removed, fam)
		}
	}
	fs.States = next
	return added, removed
}

// Index is the index of family f in States (-1: not programmed).
func (fs *Families) Index(f rules.Family) int {
	return slices.IndexFunc(fs.States, func(s *FamilyState) bool { return s.Family == f })
}

// List returns the families, IPv4 first.
func (fs *Families) List() []rules.Family {
	out := make([]rules.Family, len(fs.States))
	for i, s := range fs.States {
		out[i] = s.Family
	}
	return out
}

// NoLocal counts a family's service ports whose Local traffic policy (external, internal)
// finds no local endpoint.
type NoLocal struct{ External, Internal int }

// Sync runs sync for every family (by its index in States) and tells FamilySynced each
// outcome. Every family is attempted; the error joins the failed ones'. When every family
// succeeded, the no-local-endpoints gauge is set to their sum.
func (fs *Families) Sync(sync func(i int) (NoLocal, error)) error {
	var errs []error
	var total NoLocal
	for i, s := range fs.States {
		n, err := sync(i)
		fs.synced(s.Family, err)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total.External += n.External
		total.Internal += n.Internal
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fs.metrics.noLocalEndpoints.WithLabelValues("external").Set(float64(total.External))
	fs.metrics.noLocalEndpoints.WithLabelValues("internal").Set(float64(total.Internal))
	return nil
}

// HealthCheckAddresses is where healthCheckNodePorts listen, like NodePorts: nil (every
// address) unless --nodeport-addresses restricts a family; then the addresses it selected for
// that family at the last full sync, and the unspecified address (the family's wildcard) for an
// unrestricted one.
func (fs *Families) HealthCheckAddresses() []netip.Addr {
	var out []netip.Addr
	restricted := false
	for _, s := range fs.States {
		switch {
		case s.nodePorts != nil:
			restricted = true
			out = append(out, s.nodePorts...)
		case s.Family == rules.IPv6:
			out = append(out, netip.IPv6Unspecified())
		default:
			out = append(out, netip.IPv4Unspecified())
		}
	}
	if !restricted {
		return nil
	}
	if out == nil {
		out = []netip.Addr{} // restricted to no address: no listener
	}
	return out
}

// FamilyState is what a Proxier keeps of one IP family besides its rules.
type FamilyState struct {
	Family    rules.Family
	npCIDRs   []netip.Prefix // NodePorts answer on local addresses in these...
	npPrimary bool           // ...and on the Node's primary IP of the family
	ct        Conntrack
	metrics   *FamilyMetrics
	extIPs    config.ExternalIPPolicy
	// nodePorts is where the last full sync made NodePorts answer: nil for every local address.
	nodePorts []netip.Addr
}

// ServiceNode is what serviceports.ServicePorts is told of the node in st and of the agent's
// settings, the same for every proxy mode.
func (s *FamilyState) ServiceNode(st *tracker.State) serviceports.Node {
	node := serviceports.NodeOf(st.NodeName, st.Node)
	node.Dead = st.Dead
	node.ExternalIPs = s.extIPs
	return node
}

// NodePortAddresses reads where NodePorts answer now: restricted false means every local
// address, else addrs (local addresses in --nodeport-addresses, and the Node's primary IP).
func (s *FamilyState) NodePortAddresses(node *corev1.Node) (restricted bool, addrs []netip.Addr, err error) {
	if len(s.npCIDRs) == 0 && !s.npPrimary {
		return false, nil, nil
	}
	addrs, err = NodePortAddresses(s.Family, s.npCIDRs, s.npPrimary, node)
	if err != nil {
		return false, nil, err
	}
	return true, addrs, nil
}

// ResetNodePorts is NodePortAddresses on a full sync: what it returns becomes where the
// family's healthCheckNodePorts listen.
func (s *FamilyState) ResetNodePorts(node *corev1.Node) (restricted bool, addrs []netip.Addr, err error) {
	restricted, addrs, err = s.NodePortAddresses(node)
	if err != nil {
		return false, nil, err
	}
	s.nodePorts = nil
	if restricted {
		s.nodePorts = append([]netip.Addr{}, addrs...)
	}
	return restricted, addrs, nil
}

// DeleteStaleConntrack removes UDP entries that no longer lead where the rules send new
// packets. A failure is logged, not returned: the rules are right, and a later change retries.
func (s *FamilyState) DeleteStaleConntrack(ctx context.Context, stale *StaleUDP) {
	if stale.empty() || s.ct == nil {
		return
	}
	n, err := s.ct.DeleteUDP(s.Family, stale)
	s.metrics.conntrackDeleted.Add(float64(n))
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Cannot delete stale UDP conntrack entries", "family", s.Family.String())
	}
}

// FamilyMetrics are the metrics both proxy modes keep, under the same names.
type FamilyMetrics struct {
	noLocalEndpoints *prometheus.GaugeVec
	conntrackDeleted prometheus.Counter
}

// NewFamilyMetrics creates the metrics; the mode registers Collectors with its own.
func NewFamilyMetrics() *FamilyMetrics {
	return &FamilyMetrics{
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricsPrefix + "sync_proxy_rules_no_local_endpoints_total", Help: "Service ports with a Local traffic policy (label: external or internal) that have endpoints, none on this node."}, []string{"traffic_policy"}),
		conntrackDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "conntrack_stale_udp_entries_deleted_total", Help: "Stale UDP conntrack entries deleted after endpoint changes."}),
	}
}

// Collectors are the metrics to register.
func (m *FamilyMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.noLocalEndpoints, m.conntrackDeleted}
}

// FamilyPrefixes returns the prefixes of family f, masked.
func FamilyPrefixes(list []netip.Prefix, f rules.Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range list {
		if f.Contains(p.Addr()) {
			out = append(out, p.Masked())
		}
	}
	return out
}
