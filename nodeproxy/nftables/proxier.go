package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	agentconfig "github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/serviceports"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// Options configure a Proxier; the same as the iptables mode's (netfilter.Options) where they
// mean the same. Addresses arrive parsed and validated (config.Agent does it at startup).
type Options struct {
	ClusterCIDRs    []netip.Prefix
	NodePortCIDRs   []netip.Prefix
	NodePortPrimary bool
	MasqueradeAll   bool
	MasqueradeBit   int
	// Families are the IP families to program at first (the table of a family not listed is left
	// alone); Proxier.SetFamilies changes them.
	Families []rules.Family
	// Conntrack deletes stale UDP entries after a sync; nil skips that.
	Conntrack netfilter.Conntrack
	// Registerer registers the Proxier's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// FamilySynced is told the outcome of each family's part of every sync (nil: nobody).
	FamilySynced func(rules.Family, error)
	// Latency observes the network programming latency of each family's successful syncs
	// (nil: not measured).
	Latency *tracker.ProgrammingLatency
	// ExternalIPs is the agent's externalIPs policy (netfilter.FamilyOptions.ExternalIPs).
	ExternalIPs agentconfig.ExternalIPPolicy
}

// Proxier programs Services into the nftables table "portico" of each family, over netlink. It
// is a consumer of the agent's sync loop, like netfilter.Proxier, and shares its bookkeeping
// (netfilter.Families).
type Proxier struct {
	opts     Options
	shared   *netfilter.Families
	families []*familyProxier // one per shared.States, in that order
	metrics  *metrics
	latency  *tracker.ProgrammingLatency
	conns    *conns // shared by the families
	gens     *genTracker
	// dropped are the families SetFamilies removed whose table is still in the kernel: the
	// next Sync deletes it.
	dropped map[rules.Family]bool
}

// New returns a Proxier for opts.Families (IPv4 first).
func New(opts Options) *Proxier {
	p := &Proxier{opts: opts, metrics: newMetrics(opts.Registerer), latency: opts.Latency, conns: &conns{},
		dropped: map[rules.Family]bool{}}
	p.gens = &genTracker{conns: p.conns, clean: map[rules.Family]bool{}}
	p.shared = netfilter.NewFamilies(opts.Families, netfilter.FamilyOptions{NodePortCIDRs: opts.NodePortCIDRs,
		NodePortPrimary: opts.NodePortPrimary, Conntrack: opts.Conntrack, FamilySynced: opts.FamilySynced, ExternalIPs: opts.ExternalIPs}, p.metrics.family)
	for _, s := range p.shared.States {
		p.families = append(p.families, p.newFamily(s))
	}
	return p
}

func (p *Proxier) newFamily(s *netfilter.FamilyState) *familyProxier {
	return &familyProxier{
		FamilyState: s, fam: familyOf(s.Family), metrics: p.metrics, gens: p.gens,
		base: config{fam: familyOf(s.Family), mark: 1 << p.opts.MasqueradeBit, masqueradeAll: p.opts.MasqueradeAll,
			clusterCIDRs: netfilter.FamilyPrefixes(p.opts.ClusterCIDRs, s.Family)},
	}
}

// SetFamilies makes the Proxier program the families in want from the next Sync on: a new
// family starts with a full sync (its table written whole), a family no longer wanted has its
// table deleted by the next Sync, retried until that succeeds. It cannot fail.
func (p *Proxier) SetFamilies(want []rules.Family) error {
	old := p.families
	_, removed := p.shared.Set(want)
	p.families = nil
	for _, s := range p.shared.States {
		if i := slices.IndexFunc(old, func(f *familyProxier) bool { return f.FamilyState == s }); i >= 0 {
			p.families = append(p.families, old[i])
			continue
		}
		p.families = append(p.families, p.newFamily(s))
		delete(p.dropped, s.Family)
	}
	for _, fam := range removed {
		p.dropped[fam] = true
		delete(p.gens.clean, fam)
	}
	return nil
}

// removeDropped deletes the tables of the families SetFamilies dropped; on failure they are
// tried again on the next Sync.
func (p *Proxier) removeDropped(ctx context.Context) error {
	if len(p.dropped) == 0 {
		return nil
	}
	var fams []nftables.TableFamily
	var names []string
	for fam := range p.dropped {
		fams = append(fams, familyOf(fam).table)
		names = append(names, fam.String())
	}
	if err := deleteTables(fams...); err != nil {
		return fmt.Errorf("deleting the table of %v: %w", names, err)
	}
	clear(p.dropped)
	logr.FromContextOrDiscard(ctx).Info("Removed the table of a family no longer programmed", "families", names, "table", TableName)
	return nil
}

// Close closes the Proxier's netlink connections (kept open between syncs; see conns). A
// later Sync opens them again.
func (p *Proxier) Close() error { return p.conns.close() }

// Name names the consumer in logs.
func (p *Proxier) Name() string { return "nftables" }

// Families are the IP families the Proxier programs.
func (p *Proxier) Families() []rules.Family { return p.shared.List() }

// Sync first deletes the tables of the families SetFamilies dropped, then brings every
// family's table up to date with st: the changed Services only, or all of them when st.Full (or
// when a family's last transaction failed). Every family is attempted; the error joins the
// failed ones'.
func (p *Proxier) Sync(ctx context.Context, st *tracker.State) error {
	log := logr.FromContextOrDiscard(ctx)
	dropErr := p.removeDropped(ctx)
	return errors.Join(dropErr, p.shared.Sync(func(i int) (netfilter.NoLocal, error) {
		f := p.families[i]
		start := time.Now()
		res, err := f.sync(ctx, st)
		if err != nil {
			p.metrics.failures.Inc()
			return netfilter.NoLocal{}, err
		}
		p.latency.Programmed(st, corev1.IPFamily(f.fam.String()))
		kind := "partial"
		if res.full {
			kind = "full"
		}
		p.metrics.objects.WithLabelValues(f.fam.String(), kind).Add(float64(res.objects))
		log.V(1).Info("Programmed nftables", "family", f.fam.String(), "full", res.full, "objects", res.objects, "duration", time.Since(start))
		return netfilter.NoLocal{External: res.noLocalExternal, Internal: res.noLocalInternal}, nil
	}))
}

// HealthCheckAddresses is where healthCheckNodePorts listen: as netfilter.Proxier's.
func (p *Proxier) HealthCheckAddresses() []netip.Addr { return p.shared.HealthCheckAddresses() }

// familyProxier holds one family's state: the rendered ports and what the last successful
// transaction left in the kernel.
type familyProxier struct {
	*netfilter.FamilyState
	fam     family
	metrics *metrics
	base    config

	cfg      config
	services map[types.NamespacedName][]*rules.ServicePort
	ports    map[string]*portState // by service port key
	// elems are the shared maps' elements as in the kernel (map -> key -> verdict); claims are
	// what the ports want of them (map -> key -> port -> verdict). The endpoints maps' keys
	// each belong to one port: its portState holds them.
	elems   map[string]map[string]string
	claims  map[string]map[string]map[string]string
	hairpin map[netip.Addr]int // local endpoint IP -> ports using it
	// noLocal counts the ports whose Local traffic policy finds no local endpoint (kept with
	// ports, so that a sync does not walk every port).
	noLocal struct{ external, internal int }
	applied bool        // false: the kernel's state is unknown, the next sync is full
	gens    *genTracker // shared by the Proxier's families
	// rendered are the port states rendered by the sync under way; once it committed, their
	// rules' expressions are dropped (forget), as only their text is compared later.
	rendered []*portState
	ranges   endpointRanges
}

// endpointRanges gives each balancing chain a range of keys in its shard of the endpoints maps
// (endpointShard): a power of two (at least minRange) that holds its endpoints. A chain keeps
// its range while its endpoints fit, so that their changes are element changes; a range is
// freed when its chain goes or outgrows it, and reused (for a range of its size in its shard)
// only after that transaction committed: until then its old elements are still being deleted.
type endpointRanges struct {
	byChain map[string]keyRange
	free    map[keyRange][]uint32 // shard and size (base 0) -> bases
	pending []keyRange
	next    [endpointShards]uint32
}

type keyRange struct {
	shard      int
	base, size uint32
}

// minRange is the smallest range: room for a few more endpoints than most Services have.
const minRange = 16

func (r *endpointRanges) reset() {
	*r = endpointRanges{byChain: map[string]keyRange{}, free: map[keyRange][]uint32{}}
}

// get is chain's endpoints map and range base for n endpoints, given now if it has none that
// fits.
func (r *endpointRanges) get(chain string, n int) (string, uint32) {
	if k, ok := r.byChain[chain]; ok && uint32(n) <= k.size {
		return endpointMaps[k.shard], k.base
	}
	r.release(chain)
	k := keyRange{shard: endpointShard(chain), size: minRange}
	for k.size < uint32(n) {
		k.size *= 2
	}
	class := keyRange{shard: k.shard, size: k.size}
	if bases := r.free[class]; len(bases) > 0 {
		k.base, r.free[class] = bases[len(bases)-1], bases[:len(bases)-1]
	} else {
		k.base = r.next[k.shard]
		r.next[k.shard] += k.size
	}
	r.byChain[chain] = k
	return endpointMaps[k.shard], k.base
}

// release frees chain's range (if it has one) once the transaction under way committed.
func (r *endpointRanges) release(chain string) {
	if k, ok := r.byChain[chain]; ok {
		delete(r.byChain, chain)
		r.pending = append(r.pending, k)
	}
}

// committed makes the ranges released by the committed transaction available.
func (r *endpointRanges) committed() {
	for _, k := range r.pending {
		class := keyRange{shard: k.shard, size: k.size}
		r.free[class] = append(r.free[class], k.base)
	}
	r.pending = nil
}

type syncResult struct {
	full                             bool
	objects                          int // chains, rules and elements written or deleted
	noLocalExternal, noLocalInternal int
}

// sync brings the family's table up to date for st's changed Services (all of them on a full
// sync) in one netlink transaction, then removes stale UDP conntrack entries.
func (p *familyProxier) sync(ctx context.Context, st *tracker.State) (syncResult, error) {
	full := st.Full || !p.applied
	keys := st.Changed
	if full && p.applied && p.undrifted(st) {
		// A periodic full sync with nothing changed in nf_tables since the agent's last commit:
		// every Service is rendered again and only the difference is written (usually nothing).
		full = false
		keys = p.allKeys(st.Changed)
	}
	if full {
		if err := p.reset(st); err != nil {
			return syncResult{}, err
		}
		if !st.Full {
			all, err := st.Store.Services()
			if err != nil {
				return syncResult{}, err
			}
			keys = all
		}
	}
	tx := newTransaction(p.fam)
	// A full sync writes the whole table from p's state (commitFull): the differences are not
	// recorded.
	tx.whole = full
	stale := netfilter.NewStaleUDP()
	p.rendered = nil
	if err := p.render(st, keys, tx, stale); err != nil {
		p.applied = false
		return syncResult{}, err
	}
	// An empty partial transaction commits nothing, so the generation tells nothing new: the
	// two reads (a netlink socket each) are skipped, as for the families without changes.
	wrote := full || !tx.empty()
	var before uint32
	var genErr error
	if wrote {
		before, genErr = p.gens.conns.generation()
	}
	conns := p.gens.conns
	var err error
	if full {
		var list *nftables.Conn
		if list, err = conns.table(); err == nil {
			err = tx.commitFull(conns.builder(), list, p)
		}
	} else {
		err = tx.commitPartial(conns.builder())
	}
	var after uint32
	var sent bool
	if err == nil {
		after, sent, err = conns.send()
	}
	if err != nil {
		p.applied = false
		p.rendered = nil
		conns.reset()
		return syncResult{}, fmt.Errorf("programming %s nftables: %w", p.fam, err)
	}
	p.applied = true
	p.ranges.committed()
	p.forgetExprs()
	if wrote {
		if !sent {
			after = before // nothing committed
		}
		p.gens.committed(p.fam.Family, before, after, genErr == nil, full)
	}
	p.DeleteStaleConntrack(ctx, stale)
	return syncResult{full: full || st.Full, objects: tx.objects,
		noLocalExternal: p.noLocal.external, noLocalInternal: p.noLocal.internal}, nil
}

// undrifted reports whether a full sync may be applied as a difference: nf_tables' generation
// is still the one of the agent's last commit (nobody changed any table since), and the
// configuration-dependent chains (NodePort addresses) are unchanged.
func (p *familyProxier) undrifted(st *tracker.State) bool {
	if !p.gens.undrifted(p.fam.Family) {
		return false
	}
	cfg, err := p.config(st)
	if err != nil {
		return false
	}
	now, was := staticChains(&cfg), staticChains(&p.cfg)
	if len(now) != len(was) {
		return false
	}
	for name, rs := range now {
		if !sameRules(rs, was[name]) {
			return false
		}
	}
	return true
}

// allKeys are the Services of a full sync (changed) and those the agent still programs.
func (p *familyProxier) allKeys(changed []types.NamespacedName) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	for _, k := range changed {
		seen[k] = true
	}
	out := slices.Clone(changed)
	for k := range p.services {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// config is the rendering configuration for st's node: the NodePort addresses read again.
func (p *familyProxier) config(st *tracker.State) (config, error) {
	cfg := p.base
	restricted, addrs, err := p.NodePortAddresses(st.Node)
	if err != nil {
		return cfg, err
	}
	cfg.restricted, cfg.nodePortAddrs = restricted, addrs
	return cfg, nil
}

// reset starts a full sync: no port known, the NodePort addresses read again.
func (p *familyProxier) reset(st *tracker.State) error {
	cfg := p.base
	restricted, addrs, err := p.ResetNodePorts(st.Node)
	if err != nil {
		return err
	}
	cfg.restricted, cfg.nodePortAddrs = restricted, addrs
	p.ranges.reset()
	cfg.endpointRange = p.ranges.get
	p.cfg = cfg
	p.services = map[types.NamespacedName][]*rules.ServicePort{}
	p.ports = map[string]*portState{}
	p.elems = map[string]map[string]string{}
	p.claims = map[string]map[string]map[string]string{}
	for _, m := range sharedMaps {
		p.elems[m] = map[string]string{}
		p.claims[m] = map[string]map[string]string{}
	}
	p.hairpin = map[netip.Addr]int{}
	p.noLocal.external, p.noLocal.internal = 0, 0
	p.applied = false
	return nil
}

// render re-renders the Services keys and records in tx what changed for each of their ports.
func (p *familyProxier) render(st *tracker.State, keys []types.NamespacedName, tx *transaction, stale *netfilter.StaleUDP) error {
	node := p.ServiceNode(st)
	for _, key := range keys {
		svc, slices, err := st.Service(key)
		if err != nil {
			return err
		}
		var ports []*rules.ServicePort
		if svc != nil {
			ports = serviceports.ServicePorts(svc, slices, node, p.fam.Family)
		}
		next := map[string]*rules.ServicePort{}
		for _, sp := range ports {
			next[sp.Key()] = sp
		}
		for _, old := range p.services[key] {
			gone := *old
			gone.Endpoints = nil
			stale.Add(&gone)
			if next[old.Key()] == nil {
				p.update(tx, old.Key(), nil)
			}
		}
		for _, sp := range ports {
			stale.Add(sp)
			p.update(tx, sp.Key(), render(&p.cfg, sp))
		}
		if len(ports) > 0 {
			p.services[key] = ports
		} else {
			delete(p.services, key)
		}
	}
	return nil
}

// update replaces the state of the port key (nil: gone) and records the difference in tx.
func (p *familyProxier) update(tx *transaction, key string, next *portState) {
	prev := p.ports[key]
	if prev == nil {
		prev = &portState{}
	}
	if next == nil {
		next = &portState{}
	}
	for name, rs := range next.chains {
		if old, ok := prev.chains[name]; !ok || !sameRules(old, rs) {
			tx.writeChain(name, old, rs, ok)
		}
	}
	for name, old := range prev.chains {
		if _, ok := next.chains[name]; !ok {
			tx.deleteChain(name, old)
			p.ranges.release(name)
		}
	}
	// Elements prev had and next has not (or with another value) go, next's new ones come.
	if len(prev.elems) > 0 {
		inNext := elemIndex(next.elems)
		for _, e := range prev.elems {
			if nv, ok := inNext(e.m, e.k); !ok || nv != e.v {
				p.setElem(tx, e.m, e.k, key, "")
			}
		}
		inPrev := elemIndex(prev.elems)
		for _, e := range next.elems {
			if ov, ok := inPrev(e.m, e.k); !ok || ov != e.v {
				p.setElem(tx, e.m, e.k, key, e.v)
			}
		}
	} else {
		for _, e := range next.elems {
			p.setElem(tx, e.m, e.k, key, e.v)
		}
	}
	// Count the new local endpoints first: an IP in both stays without churn.
	for _, ip := range next.hairpin {
		if p.hairpin[ip]++; p.hairpin[ip] == 1 {
			tx.addElem(setHairpin, string(hairpinKey(ip)), "")
		}
	}
	for _, ip := range prev.hairpin {
		if p.hairpin[ip]--; p.hairpin[ip] <= 0 {
			delete(p.hairpin, ip)
			tx.deleteElem(setHairpin, string(hairpinKey(ip)))
		}
	}
	p.noLocal.external += b2i(next.noLocalExternal) - b2i(prev.noLocalExternal)
	p.noLocal.internal += b2i(next.noLocalInternal) - b2i(prev.noLocalInternal)
	if len(next.chains) == 0 && len(next.elems) == 0 && len(next.hairpin) == 0 {
		delete(p.ports, key)
	} else {
		p.ports[key] = next
		p.rendered = append(p.rendered, next)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// forgetExprs drops the netlink expressions of the rules just committed: a chain is only ever
// written from a fresh rendering (a partial sync writes the ports it rendered, a full sync
// renders every port again after reset), and later syncs compare the rules' text alone. Kept,
// they were most of the mode's retained heap (google/nftables expressions for every rule of
// every port).
func (p *familyProxier) forgetExprs() {
	for _, ps := range p.rendered {
		for _, rs := range ps.chains {
			for i := range rs {
				rs[i].exprs = nil
			}
		}
	}
	p.rendered = nil
}

// setElem records that the port owner wants element k of map m with verdict (or value) v ("":
// no longer). A key of an endpoints map belongs to one port (its balancing chain's range,
// endpointRanges), so the port's wish is the element (called for changes only: update compares
// the port's elements before and after); a key of a shared map goes through claim.
func (p *familyProxier) setElem(tx *transaction, m, k, owner, v string) {
	switch {
	case !isEndpointMap(m):
		p.claim(tx, m, k, owner, v)
	case v == "":
		tx.deleteElem(m, k)
	default:
		tx.addElem(m, k, v)
	}
}

// put makes element k of map m hold want (has), or be absent (!has), recording the change in tx.
func (p *familyProxier) put(tx *transaction, m, k, want string, has bool) {
	cur, had := p.elems[m][k]
	if had == has && cur == want {
		return
	}
	if had {
		tx.deleteElem(m, k)
		delete(p.elems[m], k)
	}
	if has {
		tx.addElem(m, k, want)
		p.elems[m][k] = want
	}
}

// claim records that the port owner wants element k of the shared map m with verdict v ("": no
// longer), and updates the element: when several ports claim one key (two Services with the
// same address and port, e.g. one deleted and one created in its place), the port with the
// smallest key has it, and the next one takes over when it lets go.
func (p *familyProxier) claim(tx *transaction, m, k, owner, v string) {
	claims := p.claims[m][k]
	if v == "" {
		delete(claims, owner)
	} else {
		if claims == nil {
			claims = map[string]string{}
			p.claims[m][k] = claims
		}
		claims[owner] = v
	}
	want, has := "", false
	if len(claims) > 0 {
		first := ""
		for o := range claims {
			if !has || o < first {
				first, has = o, true
			}
		}
		want = claims[first]
	} else {
		delete(p.claims[m], k)
	}
	p.put(tx, m, k, want, has)
}
