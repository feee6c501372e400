package netfilter

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/serviceports"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// Options configure a Proxier. Addresses arrive parsed and validated (config.Agent does it at
// startup).
type Options struct {
	// ClusterCIDRs hold the pods' addresses, of either family: traffic from outside them to a
	// ClusterIP is masqueraded, traffic from inside them to an externalTrafficPolicy: Local
	// address goes to any endpoint. Empty disables both.
	ClusterCIDRs []netip.Prefix
	// NodePortCIDRs restrict NodePorts to local addresses within them, of either family, and
	// NodePortPrimary adds the Node's primary IP of each family. A family with neither answers
	// on every local address except loopback.
	NodePortCIDRs   []netip.Prefix
	NodePortPrimary bool
	// MasqueradeAll masquerades all ClusterIP traffic.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit (0-31) that asks for masquerading.
	MasqueradeBit int
	// Netfilters are the iptables of each family to program; a family without one is left
	// alone. Required.
	Netfilters map[rules.Family]Netfilter
	// NewNetfilter creates the iptables of a family added later (SetFamilies); nil: no family
	// can be added.
	NewNetfilter func(rules.Family) (Netfilter, error)
	// Conntrack deletes stale UDP entries after a sync; nil skips that.
	Conntrack Conntrack
	// Registerer registers the Proxier's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// FamilySynced is told the outcome of each family's part of every sync (nil: nobody).
	FamilySynced func(rules.Family, error)
	// Latency observes the network programming latency of each family's successful syncs
	// (nil: not measured).
	Latency *tracker.ProgrammingLatency
	// ExternalIPs is the agent's externalIPs policy (FamilyOptions.ExternalIPs).
	ExternalIPs config.ExternalIPPolicy
}

// Proxier programs Services into netfilter: one familyProxier per IP family, each rendering
// with package rules and applying one iptables-restore per sync. It is a consumer of the
// agent's sync loop.
type Proxier struct {
	opts     Options
	shared   *Families
	families []*familyProxier // one per shared.States, in that order
	metrics  *Metrics
	latency  *tracker.ProgrammingLatency
	// dropped are the families SetFamilies removed whose rules are still in the kernel: the
	// next Sync removes them.
	dropped map[rules.Family]Netfilter
}

// New returns a Proxier for opts.Netfilters' families (IPv4 first).
func New(opts Options) *Proxier {
	p := &Proxier{opts: opts, metrics: NewMetrics(opts.Registerer), latency: opts.Latency, dropped: map[rules.Family]Netfilter{}}
	var want []rules.Family
	for fam, nf := range opts.Netfilters {
		if nf != nil {
			want = append(want, fam)
		}
	}
	p.shared = NewFamilies(want, FamilyOptions{NodePortCIDRs: opts.NodePortCIDRs, NodePortPrimary: opts.NodePortPrimary,
		Conntrack: opts.Conntrack, FamilySynced: opts.FamilySynced, ExternalIPs: opts.ExternalIPs}, p.metrics.family)
	for _, s := range p.shared.States {
		p.families = append(p.families, p.newFamily(s, opts.Netfilters[s.Family]))
	}
	return p
}

func (p *Proxier) newFamily(s *FamilyState, nf Netfilter) *familyProxier {
	return &familyProxier{
		FamilyState: s, nf: nf, metrics: p.metrics,
		baseCfg: rules.Config{
			Family:         s.Family,
			MasqueradeMark: 1 << p.opts.MasqueradeBit,
			MasqueradeAll:  p.opts.MasqueradeAll,
			ClusterCIDRs:   FamilyPrefixes(p.opts.ClusterCIDRs, s.Family),
		},
	}
}

// SetFamilies makes the Proxier program the families in want from the next Sync on: a new
// family starts with a full sync, a family no longer wanted has its rules (chains and jumps,
// as Cleanup) removed by the next Sync, retried until that succeeds. It fails, changing
// nothing, when a new family's iptables cannot be set up (Options.NewNetfilter).
func (p *Proxier) SetFamilies(want []rules.Family) error {
	nfs := map[rules.Family]Netfilter{}
	for _, fam := range want {
		if p.shared.Index(fam) >= 0 {
			continue
		}
		nf := p.dropped[fam] // back before its rules were removed
		if nf == nil {
			if p.opts.NewNetfilter == nil {
				return fmt.Errorf("cannot program %s: no iptables for it", fam)
			}
			var err error
			if nf, err = p.opts.NewNetfilter(fam); err != nil {
				return fmt.Errorf("cannot program %s: %w", fam, err)
			}
		}
		nfs[fam] = nf
	}
	old := p.families
	_, removed := p.shared.Set(want)
	p.families = nil
	for _, s := range p.shared.States {
		if i := slices.IndexFunc(old, func(f *familyProxier) bool { return f.FamilyState == s }); i >= 0 {
			p.families = append(p.families, old[i])
			continue
		}
		p.families = append(p.families, p.newFamily(s, nfs[s.Family]))
		delete(p.dropped, s.Family)
	}
	for _, f := range old {
		if slices.Contains(removed, f.Family) {
			p.dropped[f.Family] = f.nf
		}
	}
	return nil
}

// removeDropped removes the rules of the families SetFamilies dropped; a family that fails is
// tried again on the next Sync.
func (p *Proxier) removeDropped(ctx context.Context) error {
	var errs []error
	for fam, nf := range p.dropped {
		if err := cleanupFamily(ctx, nf); err != nil {
			errs = append(errs, fmt.Errorf("removing the %s rules: %w", fam, err))
			continue
		}
		delete(p.dropped, fam)
		for _, table := range []string{rules.TableNAT, rules.TableFilter} {
			p.metrics.rules.DeleteLabelValues(fam.String(), table)
		}
		logr.FromContextOrDiscard(ctx).Info("Removed the rules of a family no longer programmed", "family", fam.String())
	}
	return errors.Join(errs...)
}

// Name names the consumer in logs.
func (p *Proxier) Name() string { return "netfilter" }

// Families are the IP families the Proxier programs.
func (p *Proxier) Families() []rules.Family { return p.shared.List() }

// HealthCheckAddresses is where healthCheckNodePorts listen (Families.HealthCheckAddresses).
func (p *Proxier) HealthCheckAddresses() []netip.Addr { return p.shared.HealthCheckAddresses() }

// Sync first removes the rules of the families SetFamilies dropped, then brings every family's
// rules up to date with st: the changed Services only, or all of them when st.Full (or when a
// family's last restore failed). Every family is attempted; the error joins the failed ones',
// and the loop answers it with a full sync.
func (p *Proxier) Sync(ctx context.Context, st *tracker.State) error {
	log := logr.FromContextOrDiscard(ctx)
	dropErr := p.removeDropped(ctx)
	return errors.Join(dropErr, p.shared.Sync(func(i int) (NoLocal, error) {
		f := p.families[i]
		res, err := f.sync(ctx, st)
		if err != nil {
			return NoLocal{}, err
		}
		p.latency.Programmed(st, corev1.IPFamily(f.Family.String()))
		if len(res.repaired) > 0 {
			log.V(1).Info("Full sync wrote chains (first sync or drift)", "family", f.Family.String(), "chains", res.repaired)
		}
		kind := "partial"
		if res.full {
			kind = "full"
		}
		p.metrics.chainsRestored.WithLabelValues(f.Family.String(), kind).Add(float64(res.chainsWritten))
		p.metrics.rules.WithLabelValues(f.Family.String(), rules.TableNAT).Set(float64(res.nat))
		p.metrics.rules.WithLabelValues(f.Family.String(), rules.TableFilter).Set(float64(res.filt))
		log.V(1).Info("Programmed rules", "family", f.Family.String(), "full", res.full, "chainsWritten", res.chainsWritten)
		return NoLocal{External: res.noLocalExternal, Internal: res.noLocalInternal}, nil
	}))
}

// familyProxier holds one IP family's state: the rendered service ports and what the last
// successful restore wrote.
type familyProxier struct {
	*FamilyState
	nf        Netfilter
	metrics   *Metrics
	baseCfg   rules.Config
	builder   *rules.Builder
	ports     map[types.NamespacedName][]*rules.ServicePort
	applied   *rules.Ruleset // nil: the kernel's state is unknown, the next sync is full
	jumpsDone bool
}

// syncResult describes one family's sync for metrics.
type syncResult struct {
	full      bool
	nat, filt int
	// noLocalExternal and noLocalInternal count the ports whose Local traffic policy (external,
	// internal) finds no local endpoint.
	noLocalExternal, noLocalInternal int
	// chainsWritten counts the chains the sync's restore wrote or deleted (0: nothing restored).
	chainsWritten int
	// repaired names (up to 10 of) the chains a full sync wrote: all on the first, drifted ones after.
	repaired []string
}

// sync brings the family's rules up to date for st's changed Services (all of them on a full
// sync), in one iptables-restore, then removes stale UDP conntrack entries. Its steps: start
// afresh on a full sync, render the changed Services, compute the restore input (against the
// kernel's chains on a full sync, against the last applied ruleset otherwise), restore, make
// sure the jumps exist, delete stale conntrack entries.
func (p *familyProxier) sync(ctx context.Context, st *tracker.State) (syncResult, error) {
	full := st.Full || p.applied == nil
	if full {
		if err := p.reset(st); err != nil {
			return syncResult{}, err
		}
	}
	keys := st.Changed
	if full && !st.Full {
		// This family's kernel state is unknown (its last sync failed) while the loop asked
		// for a partial sync: render every Service, not only the changed ones.
		all, err := st.Store.Services()
		if err != nil {
			return syncResult{}, err
		}
		keys = all
	}
	stale, err := p.render(st, keys)
	if err != nil {
		return syncResult{}, err
	}
	rs := p.builder.Ruleset()
	input, saved, err := p.restoreInput(ctx, rs, full)
	if err != nil {
		return syncResult{}, err
	}
	if err := p.restore(ctx, input, full); err != nil {
		return syncResult{}, err
	}
	p.applied = rs
	if err := p.ensureJumps(saved, full); err != nil {
		return syncResult{}, err
	}
	p.DeleteStaleConntrack(ctx, stale)

	res := syncResult{full: full, nat: rs.RuleCount(rules.TableNAT), filt: rs.RuleCount(rules.TableFilter),
		chainsWritten: rules.ChainsWritten(input)}
	if full && input != nil {
		res.repaired = rules.WrittenChains(input, 10)
	}
	res.noLocalExternal, res.noLocalInternal = p.builder.NoLocalEndpoints()
	return res, nil
}

// reset starts a full sync: a new Builder, with the NodePort addresses read again.
func (p *familyProxier) reset(st *tracker.State) error {
	cfg := p.baseCfg
	restricted, addrs, err := p.ResetNodePorts(st.Node)
	if err != nil {
		return err
	}
	if restricted {
		cfg.NodePortsRestricted, cfg.NodePortAddresses = true, addrs
	}
	p.builder = rules.NewBuilder(cfg)
	p.ports = map[types.NamespacedName][]*rules.ServicePort{}
	return nil
}

// render replaces the ports of the Services keys in the Builder and collects the UDP
// destinations whose conntrack entries may now be stale.
func (p *familyProxier) render(st *tracker.State, keys []types.NamespacedName) (*StaleUDP, error) {
	stale := newStaleUDP()
	node := p.ServiceNode(st)
	for _, key := range keys {
		svc, slices, err := st.Service(key)
		if err != nil {
			return nil, err
		}
		for _, old := range p.ports[key] {
			p.builder.Delete(old.Key())
			gone := *old
			gone.Endpoints = nil
			stale.add(&gone)
		}
		delete(p.ports, key)
		if svc == nil {
			continue
		}
		ports := serviceports.ServicePorts(svc, slices, node, p.Family)
		for _, sp := range ports {
			p.builder.Set(sp)
			stale.add(sp)
		}
		if len(ports) > 0 {
			p.ports[key] = ports
		}
	}
	return stale, nil
}

// restoreInput is the transaction to restore: on a full sync the difference from what the
// kernel holds (without drift, nothing), otherwise the difference from the last applied
// ruleset. saved is the kernel's state read on a full sync (nil otherwise).
func (p *familyProxier) restoreInput(ctx context.Context, rs *rules.Ruleset, full bool) (input []byte, saved rules.Saved, err error) {
	if !full {
		return rules.RestoreInput(p.applied, rs, nil), nil, nil
	}
	if saved, err = p.nf.Save(ctx); err != nil {
		p.applied = nil
		return nil, nil, err
	}
	return rules.RestoreInput(nil, rs, saved), saved, nil
}

// restore applies input (nil: nothing to do). On failure the kernel's state is unknown: the
// next sync of the family is full.
func (p *familyProxier) restore(ctx context.Context, input []byte, full bool) error {
	if input == nil {
		return nil
	}
	if err := p.nf.Restore(ctx, input); err != nil {
		p.applied = nil
		p.metrics.restoreFailures.Inc()
		if !full {
			p.metrics.partialRestoreFailures.Inc()
		}
		return fmt.Errorf("restoring %s rules: %w", p.Family, err)
	}
	return nil
}

// ensureJumps inserts the jumps from the built-in chains on the first sync and on every full
// sync, skipping those iptables-save showed present.
func (p *familyProxier) ensureJumps(saved rules.Saved, full bool) error {
	if !full && p.jumpsDone {
		return nil
	}
	for _, j := range rules.Jumps() {
		if saved != nil && saved.HasJump(j) {
			continue
		}
		if err := p.nf.EnsureJump(j); err != nil {
			p.applied, p.jumpsDone = nil, false
			return err
		}
	}
	p.jumpsDone = true
	return nil
}
