package nodeproxy

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// informerResync is how often informers replay their caches (kube-proxy's configSyncPeriod).
const informerResync = 15 * time.Minute

// syncKey is the single item of the sync queue: every change coalesces into one pending sync.
const syncKey = "sync"

// tracker watches Services, EndpointSlices and this node, remembers which Services changed
// since the last sync, and queues a sync. It never computes rules.
type tracker struct {
	node     string
	services corelisters.ServiceLister
	// slicesByService indexes EndpointSlices by sliceServiceIndex: a lister's label-selector List
	// scans every slice of the namespace, which made a full sync quadratic (10,000 Services:
	// 10^8 label matches per family).
	slicesByService cache.Indexer
	nodes           corelisters.NodeLister
	synced          []cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	changed map[types.NamespacedName]bool
	// nodeChanged is set when the node's addresses (NodePort addresses) or zone (topology
	// hints) changed: every Service needs a sync.
	nodeChanged bool
	// queuedAt is when the oldest pending change arrived (zero: none pending).
	queuedAt time.Time
}

func newTracker(cs kubernetes.Interface, node string, queue workqueue.TypedRateLimitingInterface[string]) (*tracker, informers.SharedInformerFactory, informers.SharedInformerFactory, error) {
	factory := informers.NewSharedInformerFactory(cs, informerResync)
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, informerResync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}))
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	nodeInf := nodeFactory.Core().V1().Nodes()
	t := &tracker{
		node:            node,
		services:        svcInf.Lister(),
		slicesByService: sliceInf.Informer().GetIndexer(),
		nodes:           nodeInf.Lister(),
		queue:           queue,
		changed:         map[types.NamespacedName]bool{},
		synced:          []cache.InformerSynced{svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
	}
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{sliceServiceIndex: sliceServiceKey}); err != nil {
		return nil, nil, nil, fmt.Errorf("adding endpoint slice index: %w", err)
	}
	svcHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.serviceChanged(obj) },
		UpdateFunc: func(_, obj any) { t.serviceChanged(obj) },
		DeleteFunc: func(obj any) { t.serviceChanged(obj) },
	}
	sliceHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.sliceChanged(obj) },
		UpdateFunc: func(_, obj any) { t.sliceChanged(obj) },
		DeleteFunc: func(obj any) { t.sliceChanged(obj) },
	}
	nodeHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.nodeUpdated(nil, obj) },
		UpdateFunc: func(old, obj any) { t.nodeUpdated(old, obj) },
		DeleteFunc: func(obj any) { t.nodeUpdated(nil, obj) },
	}
	for inf, h := range map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		svcInf.Informer(): svcHandler, sliceInf.Informer(): sliceHandler, nodeInf.Informer(): nodeHandler,
	} {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("adding event handler: %w", err)
		}
		// Wait for the initial objects to reach the handlers too, not only the caches: marks
		// delivered after the first (full) sync took the changes would make the next sync a
		// partial one over every Service.
		t.synced = append(t.synced, reg.HasSynced)
	}
	return t, factory, nodeFactory, nil
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (t *tracker) serviceChanged(obj any) {
	if svc, ok := unwrap(obj).(*corev1.Service); ok {
		t.mark(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}
}

func (t *tracker) sliceChanged(obj any) {
	s, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		t.mark(types.NamespacedName{Namespace: s.Namespace, Name: name})
	}
}

func (t *tracker) nodeUpdated(old, obj any) {
	n, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	if o, ok := old.(*corev1.Node); ok && addressesEqual(o.Status.Addresses, n.Status.Addresses) &&
		o.Labels[corev1.LabelTopologyZone] == n.Labels[corev1.LabelTopologyZone] {
		return
	}
	t.mu.Lock()
	t.nodeChanged = true
	t.mu.Unlock()
	t.queue.Add(syncKey)
}

func addressesEqual(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (t *tracker) mark(key types.NamespacedName) {
	t.mu.Lock()
	t.changed[key] = true
	if t.queuedAt.IsZero() {
		t.queuedAt = time.Now()
	}
	t.mu.Unlock()
	t.queue.Add(syncKey)
}

// take returns and clears the pending changes.
func (t *tracker) take() (changed map[types.NamespacedName]bool, nodeChanged bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed, nodeChanged = t.changed, t.nodeChanged
	t.changed, t.nodeChanged, t.queuedAt = map[types.NamespacedName]bool{}, false, time.Time{}
	return changed, nodeChanged
}

// pendingSince is when the oldest unsynced change arrived, zero if none.
func (t *tracker) pendingSince() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queuedAt
}

// restore puts changes of a failed sync back so the next sync sees them.
func (t *tracker) restore(changed map[types.NamespacedName]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range changed {
		t.changed[k] = true
	}
	if len(changed) > 0 && t.queuedAt.IsZero() {
		t.queuedAt = time.Now()
	}
}

// service returns the Service and its EndpointSlices, or nil when it is gone.
func (t *tracker) service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	svc, err := t.services.Services(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, nil, nil //nolint:nilerr // a lister only fails with NotFound
	}
	objs, err := t.slicesByService.ByIndex(sliceServiceIndex, key.String())
	if err != nil {
		return nil, nil, fmt.Errorf("listing endpoint slices of %s: %w", key, err)
	}
	slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			slices = append(slices, s)
		}
	}
	return svc, slices, nil
}

// sliceServiceIndex indexes EndpointSlices by "namespace/service" (their service-name label).
const sliceServiceIndex = "portico-service"

func sliceServiceKey(obj any) ([]string, error) {
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

// allServices lists every Service key.
func (t *tracker) allServices() ([]types.NamespacedName, error) {
	list, err := t.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	out := make([]types.NamespacedName, len(list))
	for i, s := range list {
		out[i] = types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	}
	return out, nil
}

// thisNode returns the Node, or nil when it does not exist (yet).
func (t *tracker) thisNode() *corev1.Node {
	n, err := t.nodes.Get(t.node)
	if err != nil {
		return nil
	}
	return n
}
