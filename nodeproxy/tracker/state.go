package tracker

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/servicerules"
)

// State is what every consumer of the sync loop sees on one sync: which Services changed and
// read access to the tracked objects (the sync loop passes a Snapshot taken when the sync began).
// It is only valid during the Sync call it is passed to, and everything it returns is shared
// with the informer caches: read-only.
type State struct {
	// NodeName is this node's name.
	NodeName string
	// Node is this node's Node object, nil when it does not exist (yet).
	Node *corev1.Node
	// Full is set when every Service must be considered (at start, after any consumer failed,
	// on the periodic resync, when the node's addresses or zone changed); Changed then lists
	// every Service.
	Full bool
	// Changed are the Services changed since the last successful sync, sorted; a Service that
	// is gone is listed and Service reports it as nil.
	Changed []types.NamespacedName
	// Triggers are the trigger times of the EndpointSlice changes since the last sync (see
	// Trigger): a proxier hands them to ProgrammingLatency.Programmed once a family's rules are
	// programmed.
	Triggers []Trigger
	// Store reads the tracked objects.
	Store Store
	// Alive and Dead are the membership view (package membership) when the agent runs one,
	// nil otherwise: Alive holds the nodes alive now (this one included), Dead the nodes the
	// failure detector declared dead after they were alive (not those that left gracefully,
	// nor those never seen). Announcers elect among Alive; the rules leave out endpoints on
	// Dead nodes.
	Alive, Dead map[string]bool
	// RulesFailed is set, for the consumers after it, when the rules programmer (netfilter or
	// nftables) failed in this sync: the kernel then holds the rules of the last successful
	// sync, or, per IP family, this sync's. An announcer must then draw no traffic it did not
	// draw already: it withdraws as usual, but announces nothing it was not announcing before
	// this sync (what it announced was in the last successful rules and, if this sync still
	// wants it, is in this sync's too). Otherwise a VIP new in a failed sync is announced with
	// no rule for it on the node, and the node, which has no route for it, answers its first
	// packets with ICMP net unreachable until a retry programs the rules (0.5 s and more).
	RulesFailed bool
}

// Store is read access to the tracked objects (the informer caches).
type Store interface {
	// Service returns the Service and its EndpointSlices, or a nil Service when it is gone.
	Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error)
	// Services lists every Service's key, sorted.
	Services() ([]types.NamespacedName, error)
	// Node returns this node, or nil.
	Node() *corev1.Node
	// Nodes lists every Node the tracker watches, sorted by name: all of them when it watches
	// all Nodes (Options.AllNodes), else this node alone.
	Nodes() ([]*corev1.Node, error)
	// AddressPools lists the AddressPools, sorted by name; none when they are not watched.
	AddressPools() ([]v1alpha1.AddressPool, error)
}

// NodeEligible reports whether this node is a load-balancer backend by the controller's rule
// (servicerules.NodeEligible: known, not being deleted, no exclude-from-external-load-balancers
// label): a node that is not should not attract load-balancer traffic, e.g. by announcing VIPs.
func (s *State) NodeEligible() bool {
	return s.Node != nil && servicerules.NodeEligible(s.Node)
}

// Service returns the Service key and its EndpointSlices (nil Service when it is gone).
func (s *State) Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	return s.Store.Service(key)
}

// NewState reads a consistent-enough view for one sync: the node, and every Service key when
// full, else changed.
func NewState(store Store, nodeName string, full bool, changed map[types.NamespacedName]bool) (*State, error) {
	st := &State{NodeName: nodeName, Node: store.Node(), Full: full, Store: store}
	if full {
		all, err := store.Services()
		if err != nil {
			return nil, err
		}
		st.Changed = all
		return st, nil
	}
	for k := range changed {
		st.Changed = append(st.Changed, k)
	}
	slices.SortFunc(st.Changed, compareKeys)
	return st, nil
}

var _ Store = (*CacheStore)(nil)

// CacheStore is a Store over informer indexers.
type CacheStore struct {
	node     string
	services corelisters.ServiceLister
	// slicesByService indexes EndpointSlices by SliceServiceIndex: a lister's label-selector
	// List scans every slice of the namespace, which made a full sync quadratic (10,000
	// Services: 10^8 label matches per family).
	slicesByService cache.Indexer
	nodes           corelisters.NodeLister
	// pools holds AddressPools as unstructured objects (a dynamic informer); nil: none.
	pools cache.Indexer
}

// WithPools makes c read AddressPools from pools (unstructured objects) and returns c.
func (c *CacheStore) WithPools(pools cache.Indexer) *CacheStore {
	c.pools = pools
	return c
}

// NewCacheStore reads Services from services, EndpointSlices from slices (which must have the
// SliceServiceIndex) and the Node named node from nodes.
func NewCacheStore(node string, services, slices, nodes cache.Indexer) *CacheStore {
	return &CacheStore{node: node, services: corelisters.NewServiceLister(services), slicesByService: slices, nodes: corelisters.NewNodeLister(nodes)}
}

// Service implements Store.
func (c *CacheStore) Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	svc, err := c.services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, nil, nil //nolint:nilerr // a lister only fails with NotFound
	}
	objs, err := c.slicesByService.ByIndex(SliceServiceIndex, key.String())
	if err != nil {
		return nil, nil, fmt.Errorf("listing endpoint slices of %s: %w", key, err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	return svc, out, nil
}

// Services implements Store.
func (c *CacheStore) Services() ([]types.NamespacedName, error) {
	list, err := c.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	out := make([]types.NamespacedName, len(list))
	for i, s := range list {
		out[i] = types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	}
	slices.SortFunc(out, compareKeys)
	return out, nil
}

// Node implements Store.
func (c *CacheStore) Node() *corev1.Node {
	n, err := c.nodes.Get(c.node)
	if err != nil {
		return nil
	}
	return n
}

// Nodes implements Store.
func (c *CacheStore) Nodes() ([]*corev1.Node, error) {
	list, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	slices.SortFunc(list, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	return list, nil
}

// AddressPools implements Store.
func (c *CacheStore) AddressPools() ([]v1alpha1.AddressPool, error) {
	if c.pools == nil {
		return nil, nil
	}
	var out []v1alpha1.AddressPool
	for _, o := range c.pools.List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var ap v1alpha1.AddressPool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &ap); err != nil {
			return nil, fmt.Errorf("decoding AddressPool %s: %w", u.GetName(), err)
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b v1alpha1.AddressPool) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// ServicesWithEndpointsOn lists the Services with an endpoint (ready or not) on one of nodes,
// sorted: the ones whose rules change when those nodes' liveness does.
func (c *CacheStore) ServicesWithEndpointsOn(nodes map[string]bool) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	for _, o := range c.slicesByService.List() {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			continue
		}
		for _, e := range s.Endpoints {
			if e.NodeName != nil && nodes[*e.NodeName] {
				seen[types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}] = true
				break
			}
		}
	}
	out := make([]types.NamespacedName, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// SliceServiceIndex indexes EndpointSlices by "namespace/service" (their service-name label).
const SliceServiceIndex = "portico-service"

// SliceServiceKey is the index function of SliceServiceIndex.
func SliceServiceKey(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{types.NamespacedName{Namespace: s.Namespace, Name: name}.String()}, nil
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
