package tracker

import (
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/servicerules"
)

// informerResync is how often informers replay their caches (kube-proxy's configSyncPeriod).
const informerResync = 15 * time.Minute

// Tracker watches Services, EndpointSlices and this node, remembers which Services changed
// since the last sync, and calls notify on every change. It never computes rules.
type Tracker struct {
	node   string
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
	// triggers are the pending EndpointSlice changes' trigger times, for the network
	// programming latency; started is when the tracker was created (older triggers are not
	// measured).
	triggers []Trigger
	started  time.Time
	// metrics count the changes seen (nil: not counted).
	metrics *changeMetrics
}

// AddressPoolsResource is the AddressPool resource the tracker watches with Options.Pools.
var AddressPoolsResource = v1alpha1.GroupVersion.WithResource("addresspools")

// Options select what a Tracker watches beyond Services, EndpointSlices and this Node.
type Options struct {
	// AllNodes watches every Node (announcers elect among them) instead of this node alone.
	// A change to another node's labels, addresses, conditions, taints or deletion queues a
	// sync without marking any Service.
	AllNodes bool
	// IgnoreExcludeLB strips the exclude-from-external-load-balancers label from the Nodes as
	// they enter the cache (servicerules.IgnoreExcludeLabel), so every consumer sees them
	// without it.
	IgnoreExcludeLB bool
	// Pools, when set, watches AddressPools (portico-lb.io/v1alpha1) through it; a change
	// queues a sync without marking any Service.
	Pools dynamic.Interface
	// Registerer, when set, registers the counts of Service and EndpointSlice changes seen
	// (ChangeMetricNames).
	Registerer prometheus.Registerer
}

// LabelServiceProxyName on a Service (and its EndpointSlices) names the proxy that serves it.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// ProxiedSelector selects the Services and EndpointSlices a proxy with no name serves, as
// kube-proxy does: not those another proxy serves (labelled service.kubernetes.io/service-proxy-name)
// and not the slices of headless Services (labelled service.kubernetes.io/headless).
var ProxiedSelector = labels.NewSelector().Add(
	must(labels.NewRequirement(LabelServiceProxyName, selection.DoesNotExist, nil)),
	must(labels.NewRequirement(corev1.IsHeadlessService, selection.DoesNotExist, nil)),
).String()

func must(r *labels.Requirement, err error) labels.Requirement {
	if err != nil {
		panic(err)
	}
	return *r
}

// New sets up the informers of a Tracker for node; notify is called (from informer goroutines)
// after every recorded change. Start runs the informers.
func New(cs kubernetes.Interface, node string, notify func(), opts Options) (*Tracker, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, informerResync, informers.WithTransform(strip),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ProxiedSelector }))
	nodeTransform := strip
	if opts.IgnoreExcludeLB {
		nodeTransform = stripWithoutExcludeLabel
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, informerResync, informers.WithTransform(nodeTransform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			if !opts.AllNodes {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
			}
		}))
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	nodeInf := nodeFactory.Core().V1().Nodes()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{SliceServiceIndex: SliceServiceKey}); err != nil {
		return nil, fmt.Errorf("adding endpoint slice index: %w", err)
	}
	store := NewCacheStore(node, svcInf.Informer().GetIndexer(), sliceInf.Informer().GetIndexer(), nodeInf.Informer().GetIndexer())
	starts := []func(<-chan struct{}){factory.Start, nodeFactory.Start}
	t := &Tracker{
		node:    node,
		store:   store,
		notify:  notify,
		changed: map[types.NamespacedName]bool{},
		started: time.Now(),
		metrics: newChangeMetrics(opts.Registerer),
		synced:  []cache.InformerSynced{svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
	}
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{}
	if opts.Pools != nil {
		poolFactory := dynamicinformer.NewDynamicSharedInformerFactory(opts.Pools, informerResync)
		poolInf := poolFactory.ForResource(AddressPoolsResource).Informer()
		store.WithPools(poolInf.GetIndexer())
		starts = append(starts, poolFactory.Start)
		t.synced = append(t.synced, poolInf.HasSynced)
		handlers[poolInf] = cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { t.notify() },
			UpdateFunc: func(old, obj any) { t.poolUpdated(old, obj) },
			DeleteFunc: func(any) { t.notify() },
		}
	}
	t.start = func(stop <-chan struct{}) {
		for _, s := range starts {
			s(stop)
		}
	}
	svcHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.serviceChanged(nil, obj) },
		UpdateFunc: func(old, obj any) { t.serviceChanged(old, obj) },
		DeleteFunc: func(obj any) { t.serviceChanged(nil, obj) },
	}
	sliceHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.sliceChanged(nil, obj, false) },
		UpdateFunc: func(old, obj any) { t.sliceChanged(old, obj, false) },
		DeleteFunc: func(obj any) { t.sliceChanged(nil, obj, true) },
	}
	nodeHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.nodeUpdated(nil, obj) },
		UpdateFunc: func(old, obj any) { t.nodeUpdated(old, obj) },
		DeleteFunc: func(obj any) { t.nodeUpdated(nil, obj) },
	}
	handlers[svcInf.Informer()], handlers[sliceInf.Informer()], handlers[nodeInf.Informer()] = svcHandler, sliceHandler, nodeHandler
	for inf, h := range handlers {
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
	return &Tracker{store: store, notify: notify, changed: map[types.NamespacedName]bool{}, started: time.Now()}
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

func (t *Tracker) serviceChanged(old, obj any) {
	if svc, ok := unwrap(obj).(*corev1.Service); ok {
		if o, _ := old.(*corev1.Service); o == nil || o.ResourceVersion != svc.ResourceVersion {
			t.metrics.serviceChanged()
		}
		t.Mark(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}
}

// sliceChanged marks the slice's Service, and records the change's trigger time (SliceChanged).
func (t *Tracker) sliceChanged(old, obj any, deleted bool) {
	s, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	o, _ := old.(*discoveryv1.EndpointSlice)
	t.SliceChanged(o, s, deleted)
}

// SliceChanged records a change of EndpointSlice s (old: its previous version, nil when added;
// deleted: it is gone): its Service is marked, and the change's trigger time is kept for the
// network programming latency (see Trigger), or, on deletion, the Service's pending ones
// dropped.
func (t *Tracker) SliceChanged(old, s *discoveryv1.EndpointSlice, deleted bool) {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: name}
	if deleted || old == nil || old.ResourceVersion != s.ResourceVersion {
		t.metrics.sliceChanged()
	}
	t.mu.Lock()
	if deleted {
		t.triggers = dropTriggers(t.triggers, key)
	} else if tr, ok := sliceTrigger(old, s, t.started); ok {
		t.triggers = append(t.triggers, tr)
	}
	t.mu.Unlock()
	t.Mark(key)
}

func (t *Tracker) nodeUpdated(old, obj any) {
	n, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	if n.Name != t.node {
		// Another node (Options.AllNodes): only what elections read matters.
		if o, ok := old.(*corev1.Node); !ok || electionFieldsChanged(o, n) {
			t.notify()
		}
		return
	}
	if o, ok := old.(*corev1.Node); ok && electionFieldsChanged(o, n) {
		t.notify()
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

// electionFieldsChanged reports whether a Node changed in what announcers read: labels
// (selectors, the exclude label), addresses (membership peers), taints and deletion
// (eligibility), conditions' statuses (NetworkUnavailable). Heartbeat-only updates do not count.
func electionFieldsChanged(o, n *corev1.Node) bool {
	if !maps.Equal(o.Labels, n.Labels) || !addressesEqual(o.Status.Addresses, n.Status.Addresses) ||
		!reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		len(o.Status.Conditions) != len(n.Status.Conditions) {
		return true
	}
	for i := range o.Status.Conditions {
		if o.Status.Conditions[i].Type != n.Status.Conditions[i].Type || o.Status.Conditions[i].Status != n.Status.Conditions[i].Status {
			return true
		}
	}
	return false
}

// poolUpdated queues a sync when a pool's spec changed (status updates are the controller's
// usage counters, which announcers do not read).
func (t *Tracker) poolUpdated(old, obj any) {
	o, ok1 := old.(*unstructured.Unstructured)
	n, ok2 := obj.(*unstructured.Unstructured)
	if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && o.GetDeletionTimestamp().IsZero() == n.GetDeletionTimestamp().IsZero() {
		return
	}
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

// Take returns and clears the pending changes: the changed Services, whether the node changed
// in a way that needs every Service synced, and the EndpointSlice changes' trigger times. The
// triggers of a failed sync are not Restored (as kube-proxy, which measures successful syncs
// only, drops them): the retry's latency would count a failure's back-off.
func (t *Tracker) Take() (changed map[types.NamespacedName]bool, nodeChanged bool, triggers []Trigger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed, nodeChanged, triggers = t.changed, t.nodeChanged, t.triggers
	t.changed, t.nodeChanged, t.queuedAt, t.triggers = map[types.NamespacedName]bool{}, false, time.Time{}, nil
	return changed, nodeChanged, triggers
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

// stripWithoutExcludeLabel is the node informer's transform under Options.IgnoreExcludeLB:
// strip, then the exclude label goes too. The informer hands it freshly decoded objects, which
// it may change in place.
func stripWithoutExcludeLabel(obj any) (any, error) {
	obj, err := strip(obj)
	if n, ok := obj.(*corev1.Node); ok && err == nil {
		servicerules.IgnoreExcludeLabel(n)
	}
	return obj, err
}
