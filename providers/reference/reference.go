package reference

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/providers"
)

// Pools used when Options leave them unset: RFC 2544 benchmarking and RFC 3849 documentation
// space, which no real network routes.
var (
	defaultPool  = netip.MustParsePrefix("198.18.128.0/24")
	defaultPool6 = netip.MustParsePrefix("2001:db8:128::/120")
)

// ErrPoolExhausted is wrapped by the error Ensure returns when no address of a requested family
// is free. It is not an *providers.InvalidError: the Service is fine, the pool is full, and the
// call succeeds once another load balancer is deleted, so callers retry it like any transient
// error.
var ErrPoolExhausted = errors.New("address pool exhausted")

// Operation names accepted by FailNext and used as keys by Calls.
const (
	OpEnsure = "ensure"
	OpGet    = "get"
	OpDelete = "delete"
)

// HostnameDomain is the domain of the names reported with Options.Hostnames. ".invalid" never
// resolves (RFC 2606).
const HostnameDomain = "lb.invalid"

// Options configure a reference Provider. The zero value is usable.
type Options struct {
	// Name returned by Provider.Name; default "reference".
	Name string
	// Pool is the range ingress addresses are allocated from for its own IP family; default
	// 198.18.128.0/24. For IPv4 pools of /30 and larger the network and broadcast addresses are
	// never handed out.
	Pool netip.Prefix
	// Pool6 is the IPv6 range used when Pool is IPv4; default 2001:db8:128::/120. It must be unset
	// when Pool is IPv6 (the provider then serves IPv6 only).
	Pool6 netip.Prefix
	// Capabilities the provider reports and enforces. When IPFamilies is nil the provider
	// reports the families it has a pool for.
	Capabilities providers.Capabilities
	// Hostnames makes the provider report one DNS name "<name>-<namespace>-<uid8>.lb.invalid"
	// instead of one IP per family, as cloud load balancers do. That ingress has no IPMode, since
	// the API allows ipMode only on an ingress with an IP. Addresses are still allocated (and
	// RequestedIPs honoured) behind the name.
	Hostnames bool
}

// Provider is the in-memory reference implementation of providers.Provider. Create it with New.
type Provider struct {
	name      string
	caps      providers.Capabilities
	hostnames bool
	pools     map[providers.IPFamily]*pool

	mu       sync.Mutex
	lbs      map[providers.Ref]*entry
	calls    map[string]int
	failNext map[string][]error
	delay    time.Duration
	repairs  int
	warnings []string
}

var _ providers.Provider = (*Provider)(nil)

// entry is one load balancer as the provider holds it.
type entry struct {
	desired *providers.LoadBalancer
	// addrs holds one address per family, in the order of desired.IPFamilies.
	addrs   []netip.Addr
	drifted bool
}

// New returns a Provider configured by opts. It panics if opts are inconsistent (a Pool6 that is
// not IPv6, or Capabilities.IPFamilies naming a family without a pool): that is a mistake in the
// test, not a runtime condition.
func New(opts Options) *Provider {
	if opts.Name == "" {
		opts.Name = "reference"
	}
	if !opts.Pool.IsValid() {
		opts.Pool = defaultPool
	}
	pools := map[providers.IPFamily]*pool{familyOf(opts.Pool.Addr()): newPool(opts.Pool)}
	switch {
	case opts.Pool.Addr().Is6() && opts.Pool6.IsValid():
		panic("reference: Options.Pool6 must be unset when Options.Pool is IPv6")
	case opts.Pool.Addr().Is4() && !opts.Pool6.IsValid():
		opts.Pool6 = defaultPool6
	}
	if opts.Pool6.IsValid() {
		if !opts.Pool6.Addr().Is6() || opts.Pool6.Addr().Is4In6() {
			panic(fmt.Sprintf("reference: Options.Pool6 %s is not an IPv6 prefix", opts.Pool6))
		}
		pools[providers.IPv6] = newPool(opts.Pool6)
	}

	caps := cloneCapabilities(opts.Capabilities)
	if caps.IPFamilies == nil {
		for _, f := range []providers.IPFamily{providers.IPv4, providers.IPv6} {
			if pools[f] != nil {
				caps.IPFamilies = append(caps.IPFamilies, f)
			}
		}
	}
	for _, f := range caps.IPFamilies {
		if pools[f] == nil {
			panic(fmt.Sprintf("reference: Capabilities.IPFamilies lists %s but there is no %s pool", f, f))
		}
	}

	return &Provider{
		name:      opts.Name,
		caps:      caps,
		hostnames: opts.Hostnames,
		pools:     pools,
		lbs:       map[providers.Ref]*entry{},
		calls:     map[string]int{},
		failNext:  map[string][]error{},
	}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return p.name }

// Capabilities implements providers.Provider. The result is a copy.
func (p *Provider) Capabilities() providers.Capabilities { return cloneCapabilities(p.caps) }

// ParseOptions implements providers.Provider: the reference provider has no annotation keys of
// its own. Ensure stores whatever LoadBalancer.Options holds, as it stores the rest of the model.
func (p *Provider) ParseOptions(map[string]string) (providers.ServiceOptions, field.ErrorList) {
	return nil, nil
}

// Ensure implements providers.Provider. It validates lb, allocates (or keeps) one address per
// IP family, stores a deep copy of lb and returns the Status. A call that fails changes nothing.
func (p *Provider) Ensure(ctx context.Context, lb *providers.LoadBalancer) (providers.Status, error) {
	if err := p.enter(ctx, OpEnsure); err != nil {
		return providers.Status{}, err
	}
	if lb == nil {
		return providers.Status{}, errors.New("ensuring load balancer: nil model")
	}
	if lb.Ref.Namespace == "" || lb.Ref.Name == "" {
		return providers.Status{}, fmt.Errorf("ensuring load balancer %q: ref needs a namespace and a name", lb.Ref)
	}
	if err := p.validate(lb); err != nil {
		return providers.Status{}, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.lbs[lb.Ref]
	addrs, err := p.allocate(lb, e)
	if err != nil {
		return providers.Status{}, err
	}
	if e == nil {
		e = &entry{}
		p.lbs[lb.Ref] = e
	}
	p.release(lb.Ref, e.addrs, addrs)
	e.addrs = addrs
	e.desired = clone(lb)
	if e.drifted {
		e.drifted = false
		p.repairs++
	}
	st := p.status(e)
	st.Warnings = slices.Clone(p.warnings)
	return st, nil
}

// Get implements providers.Provider.
func (p *Provider) Get(ctx context.Context, ref providers.Ref) (providers.Status, error) {
	if err := p.enter(ctx, OpGet); err != nil {
		return providers.Status{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.lbs[ref]
	if !ok {
		return providers.Status{}, fmt.Errorf("getting load balancer %s: %w", ref, providers.ErrNotFound)
	}
	return p.status(e), nil
}

// Delete implements providers.Provider. It frees the load balancer's addresses; deleting a Ref
// that does not exist succeeds.
func (p *Provider) Delete(ctx context.Context, ref providers.Ref) error {
	if err := p.enter(ctx, OpDelete); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.lbs[ref]
	if !ok {
		return nil
	}
	p.release(ref, e.addrs, nil)
	delete(p.lbs, ref)
	return nil
}

// allocate returns the addresses lb should have, one per family in lb.IPFamilies order, without
// changing any state. Addresses e already holds are kept unless a different one is requested.
// The caller holds p.mu.
func (p *Provider) allocate(lb *providers.LoadBalancer, e *entry) ([]netip.Addr, error) {
	addrs := make([]netip.Addr, 0, len(lb.IPFamilies))
	var fresh []netip.Addr
	for _, fam := range lb.IPFamilies {
		pl := p.pools[fam]
		want, requested := requestedFor(lb, fam)
		if requested {
			if owner, used := pl.owner[want]; used && owner != lb.Ref {
				return nil, providers.Invalid("spec.loadBalancerIP",
					"address %s is already in use by another load balancer", want)
			}
			addrs = append(addrs, want)
			continue
		}
		if e != nil {
			if held := holding(e.addrs, fam); held.IsValid() {
				addrs = append(addrs, held)
				continue
			}
		}
		a, ok := pl.next()
		if !ok {
			return nil, fmt.Errorf("allocating %s address for %s from %s: %w", fam, lb.Ref, pl.prefix, ErrPoolExhausted)
		}
		addrs = append(addrs, a)
		fresh = append(fresh, a)
	}
	// Commit: mark the addresses as owned. Nothing above changed state, so an error left the
	// provider untouched.
	for _, a := range addrs {
		p.pools[familyOf(a)].take(a, lb.Ref, slices.Contains(fresh, a))
	}
	return addrs, nil
}

// release frees the addresses in old that are not in keep. The caller holds p.mu.
func (p *Provider) release(ref providers.Ref, old, keep []netip.Addr) {
	for _, a := range old {
		if !slices.Contains(keep, a) {
			p.pools[familyOf(a)].free(a, ref)
		}
	}
}

// status renders the Status of e. The caller holds p.mu.
func (p *Provider) status(e *entry) providers.Status {
	if p.hostnames {
		// No IPMode: the API allows ipMode only on an ingress that has an IP.
		return providers.Status{Ingress: []providers.Ingress{{Hostname: hostname(e.desired.Ref)}}}
	}
	st := providers.Status{Ingress: make([]providers.Ingress, 0, len(e.addrs))}
	for _, a := range e.addrs {
		st.Ingress = append(st.Ingress, providers.Ingress{IP: a, IPMode: providers.IPModeVIP})
	}
	return st
}

// hostname is "<name>-<namespace>-<uid8>.lb.invalid", with the first label cut to the
// 63-character DNS limit by shortening "<name>-<namespace>".
func hostname(ref providers.Ref) string {
	uid := strings.ToLower(strings.ReplaceAll(ref.UID, "-", ""))
	if len(uid) > 8 {
		uid = uid[:8]
	}
	label := strings.ToLower(ref.Name + "-" + ref.Namespace)
	limit := 63
	if uid != "" {
		limit -= len(uid) + 1
	}
	if len(label) > limit {
		label = strings.TrimRight(label[:limit], "-")
	}
	if uid != "" {
		label += "-" + uid
	}
	return label + "." + HostnameDomain
}

// requestedFor returns the requested address of family fam, if any. validate has made sure
// there is at most one per family.
func requestedFor(lb *providers.LoadBalancer, fam providers.IPFamily) (netip.Addr, bool) {
	for _, a := range lb.RequestedIPs {
		if familyOf(a) == fam {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// holding returns the address of family fam in addrs, or the zero Addr.
func holding(addrs []netip.Addr, fam providers.IPFamily) netip.Addr {
	for _, a := range addrs {
		if familyOf(a) == fam {
			return a
		}
	}
	return netip.Addr{}
}

// familyOf returns the IP family of a (IPv4-mapped IPv6 addresses count as IPv4).
func familyOf(a netip.Addr) providers.IPFamily {
	if a.Unmap().Is4() {
		return providers.IPv4
	}
	return providers.IPv6
}

func cloneCapabilities(c providers.Capabilities) providers.Capabilities {
	c.Protocols = slices.Clone(c.Protocols)
	c.IPFamilies = slices.Clone(c.IPFamilies)
	return c
}
