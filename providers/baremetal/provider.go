package baremetal

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/providers"
)

// Name is the provider's name.
const Name = "baremetal"

// PendingRetry is how long a pending Service (exhausted pool, no pool for it) waits before the
// controller tries again.
const PendingRetry = 10 * time.Second

// Options configure a Provider.
type Options struct {
	// Source reads pools, Services and namespaces. Required.
	Source Source
	// Owns reports whether Services of a loadBalancerClass (nil: class-less) are served by this
	// provider; the rebuild at start takes addresses only from those, and the addresses every
	// other Service holds or requests are reserved (ForeignClaims). Nil means every
	// LoadBalancer Service (conservative: nothing any Service reports is handed out again).
	Owns func(class *string) bool
}

// Provider is the bare-metal providers.Provider. Create it with New.
type Provider struct {
	src     Source
	owns    func(class *string) bool
	metrics *metrics

	// syncMu serialises the one rebuild from the Services' status; synced is set once it is
	// done, and nothing is allocated or released before.
	syncMu sync.Mutex
	synced atomic.Bool

	// mu guards the allocator and pools, and is held only for pure, in-memory steps.
	mu    sync.Mutex
	alloc *Allocator
	pools []*addresspool.Pool // last seen, for metrics
}

var _ providers.Provider = (*Provider)(nil)

// New returns a Provider. It reads nothing until its first call.
func New(opts Options) *Provider {
	return &Provider{src: opts.Source, owns: opts.Owns, alloc: NewAllocator(), metrics: newMetrics()}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider: portico-agent serves the VIP itself (no node
// ports needed), with affinity, any protocol mix, requested addresses and both families.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{SessionAffinity: true, MixedProtocols: true, RequestedIPs: true}
}

// Ensure implements providers.Provider: it decides (or keeps) the Service's addresses.
func (p *Provider) Ensure(ctx context.Context, lb *providers.LoadBalancer) (st providers.Status, err error) {
	if lb == nil {
		return providers.Status{}, errors.New("ensuring load balancer: nil model")
	}
	if lb.Ref.Namespace == "" || lb.Ref.Name == "" {
		return providers.Status{}, fmt.Errorf("ensuring load balancer %q: ref needs a namespace and a name", lb.Ref)
	}
	defer p.metrics.observeAllocation(time.Now(), &err)
	if err := p.sync(ctx); err != nil {
		return providers.Status{}, err
	}
	// Reads happen outside the lock and may be stale (they come from an informer cache): only
	// the allocator's record, under the lock, decides who holds what (see doc.go).
	pools, err := p.readPools(ctx)
	if err != nil {
		return providers.Status{}, err
	}
	var nsLabels map[string]string
	if selectsNamespaces(pools) {
		if nsLabels, err = p.src.NamespaceLabels(ctx, lb.Ref.Namespace); err != nil {
			return providers.Status{}, err
		}
	}
	if _, err := optionsOf(lb); err != nil {
		return providers.Status{}, err
	}
	req := RequestFor(lb, nsLabels)
	if req.Reserved, err = p.foreignClaims(ctx); err != nil {
		return providers.Status{}, err
	}

	ips, err := p.assign(pools, req)
	var pend *PendingError
	if errors.As(err, &pend) {
		return providers.Status{}, providers.RetryAfter(PendingRetry, "%s", pend.Reason)
	}
	if err != nil {
		return providers.Status{}, err
	}
	return status(ips), nil
}

// assign is the only step of Ensure under the lock: pure and in memory.
func (p *Provider) assign(pools []*addresspool.Pool, req Request) ([]netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pools = pools
	return p.alloc.Assign(pools, req)
}

// Get implements providers.Provider.
func (p *Provider) Get(ctx context.Context, ref providers.Ref) (providers.Status, error) {
	if err := p.sync(ctx); err != nil {
		return providers.Status{}, err
	}
	p.mu.Lock()
	ips, ok := p.alloc.Holding(ref)
	p.mu.Unlock()
	if !ok {
		return providers.Status{}, fmt.Errorf("getting load balancer %s: %w", ref, providers.ErrNotFound)
	}
	return status(ips), nil
}

// Delete implements providers.Provider: the Service's addresses go back to their pools.
func (p *Provider) Delete(ctx context.Context, ref providers.Ref) error {
	// Rebuild first, or the rebuild would later restore what is being deleted from a status
	// not yet cleared.
	if err := p.sync(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alloc.Release(ref)
	return nil
}

// foreignClaims reads the addresses Services this provider does not serve hold or request,
// from the informer's view of every Service (see doc.go, "Other allocators").
func (p *Provider) foreignClaims(ctx context.Context) (Claims, error) {
	if p.owns == nil {
		return nil, nil // every Service is ours: the allocator's record has them all
	}
	svcs, err := p.src.WatchedServices(ctx)
	if err != nil {
		return nil, err
	}
	return ForeignClaims(svcs, p.owns), nil
}

func (p *Provider) readPools(ctx context.Context) ([]*addresspool.Pool, error) {
	items, err := p.src.AddressPools(ctx)
	if err != nil {
		return nil, err
	}
	return addresspool.Resolve(items), nil
}

// sync rebuilds the allocations from the owned Services' status, once, before anything is
// allocated or released. The Services are read from the API server (a quorum read), never from
// a cache: see doc.go.
func (p *Provider) sync(ctx context.Context) error {
	if p.synced.Load() {
		return nil
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if p.synced.Load() {
		return nil
	}
	svcs, err := p.src.Services(ctx)
	if err != nil {
		return fmt.Errorf("rebuilding allocations: %w", err)
	}
	SortOldestFirst(svcs)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range svcs {
		svc := &svcs[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || (p.owns != nil && !p.owns(svc.Spec.LoadBalancerClass)) {
			continue
		}
		ref := providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
		p.alloc.Restore(ref, statusIPs(svc), serviceSharing(svc))
	}
	p.synced.Store(true)
	return nil
}

// serviceSharing is RequestFor's Sharing for a Service read at rebuild time. An annotation
// that does not parse shares with no one.
func serviceSharing(svc *corev1.Service) Sharing {
	opts, _ := ParseServiceOptions(svc.Annotations)
	s := Sharing{
		Key:     opts.AllowSharedIP,
		Backend: backendKey(svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal, svc.Spec.Selector),
	}
	for _, port := range svc.Spec.Ports {
		proto := port.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		s.Ports = append(s.Ports, PortKey{Protocol: providers.Protocol(proto), Port: port.Port})
	}
	return s
}

func statusIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

func selectsNamespaces(pools []*addresspool.Pool) bool {
	for _, p := range pools {
		if p.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

func status(ips []netip.Addr) providers.Status {
	st := providers.Status{Ingress: make([]providers.Ingress, 0, len(ips))}
	for _, ip := range ips {
		st.Ingress = append(st.Ingress, providers.Ingress{IP: ip, IPMode: providers.IPModeVIP})
	}
	return st
}

// SortOldestFirst puts Services in the order the allocator rebuilds its allocations in: the
// oldest first, then by namespace and name, so that every rebuild meets the claims in one order.
func SortOldestFirst(svcs []corev1.Service) {
	sort.SliceStable(svcs, func(i, j int) bool {
		a, b := &svcs[i], &svcs[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
