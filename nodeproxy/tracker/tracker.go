package tracker

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// informerResync is how often informers replay their caches (kube-proxy's configSyncPeriod).
const informerResync = 15 * time.Minute

// Tracker watches Services, EndpointSlices and this node, remembers which Services changed
// since the last sync, and calls notify on every change. It never computes rules.
type Tracker struct {
	store  *CacheStore
	notify func()
	// synced report when the caches and the event handlers have seen the initial objects.
	synced []cache.InformerSynced
	start  func(stop <-chan struct{})

	mu      sync.Mutex
	changed map[types.NamespacedName]bool
	// nodeChanged is set when the node's addresses (NodePort addresses) or zone (topology
	// hints) changed: every Service needs a sync.
	nodeChanged bool
	// queuedAt is when the oldest pending change arrived (zero: none pending).
	queuedAt time.Time
}

// New sets up the informers of a Tracker for node; notify is called (from informer goroutines)
// after every recorded change. Start runs the informers.
func New(cs kubernetes.Interface, node string, notify func()) (*Tracker, error) {
	factory := informers.NewSharedInformerFactory(cs, informerResync)
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, informerResync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}))
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	nodeInf := nodeFactory.Core().V1().Nodes()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{SliceServiceIndex: SliceServiceKey}); err != nil {
		return nil, fmt.Errorf("adding endpoint slice index: %w", err)
	}
	t := &Tracker{
		store:   NewCacheStore(node, svcInf.Informer().GetIndexer(), sliceInf.Informer().GetIndexer(), nodeInf.Informer().GetIndexer()),
		notify:  notify,
		changed: map[types.NamespacedName]bool{},
		synced:  []cache.InformerSynced{svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		start:   func(stop <-chan struct{}) { factory.Start(stop); nodeFactory.Start(stop) },
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
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		// Wait for the initial objects to reach the handlers too, not only the caches: marks
		// delivered after the first (full) sync took the changes would make the next sync a
		// partial one over every Service.
		t.synced = append(t.synced, reg.HasSynced)
	}
	return t, nil
}

// NewForStore returns a Tracker over an existing store without informers (tests, profiling):
// changes are recorded with Mark.
func NewForStore(store *CacheStore, notify func()) *Tracker {
	if notify == nil {
		notify = func() {}
	}
	return &Tracker{store: store, notify: notify, changed: map[types.NamespacedName]bool{}}
}

// Start runs the informers until stop is closed.
func (t *Tracker) Start(stop <-chan struct{}) {
	if t.start != nil {
		t.start(stop)
	}
}

// WaitForSync waits until the caches and the event handlers have seen the initial objects.
func (t *Tracker) WaitForSync(stop <-chan struct{}) bool {
	return cache.WaitForCacheSync(stop, t.synced...)
}

// Store is read access to the tracked objects.
func (t *Tracker) Store() *CacheStore { return t.store }

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (t *Tracker) serviceChanged(obj any) {
	if svc, ok := unwrap(obj).(*corev1.Service); ok {
		t.Mark(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}
}

func (t *Tracker) sliceChanged(obj any) {
	s, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		t.Mark(types.NamespacedName{Namespace: s.Namespace, Name: name})
	}
}

func (t *Tracker) nodeUpdated(old, obj any) {
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
	t.notify()
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

// Mark records that the Service key changed and notifies.
func (t *Tracker) Mark(key types.NamespacedName) {
	t.mu.Lock()
	t.changed[key] = true
	if t.queuedAt.IsZero() {
		t.queuedAt = time.Now()
	}
	t.mu.Unlock()
	t.notify()
}

// Take returns and clears the pending changes: the changed Services, and whether the node
// changed in a way that needs every Service synced.
func (t *Tracker) Take() (changed map[types.NamespacedName]bool, nodeChanged bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed, nodeChanged = t.changed, t.nodeChanged
	t.changed, t.nodeChanged, t.queuedAt = map[types.NamespacedName]bool{}, false, time.Time{}
	return changed, nodeChanged
}

// PendingSince is when the oldest unsynced change arrived, zero if none.
func (t *Tracker) PendingSince() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queuedAt
}

// Restore puts changes of a failed sync back so the next sync sees them.
func (t *Tracker) Restore(changed map[types.NamespacedName]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range changed {
		t.changed[k] = true
	}
	if len(changed) > 0 && t.queuedAt.IsZero() {
		t.queuedAt = time.Now()
	}
}

// Pending returns the changes not yet taken (tests).
func (t *Tracker) Pending() map[types.NamespacedName]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]bool, len(t.changed))
	for k := range t.changed {
		out[k] = true
	}
	return out
}
