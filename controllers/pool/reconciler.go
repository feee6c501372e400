package pool

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "portico-addresspool"

// Condition reasons and Event reasons.
const (
	ReasonValid       = "Valid"
	ReasonInvalid     = "InvalidSpec"
	ReasonNoConflict  = "NoOverlap"
	ReasonOverlapping = "Overlapping"
)

// Reconciler writes AddressPool status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers a pool reconciler with mgr, whose scheme must hold v1alpha1.
func SetupWithManager(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("portico-controller")}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Any pool's change can change another's conflicts; any Service's status its counts.
		// Status-only pool updates (ours) do not bump the generation and are ignored.
		Watches(&v1alpha1.AddressPool{}, handler.EnqueueRequestsFromMapFunc(r.allPools), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Service{}, r.allPoolsLater(), builder.WithPredicates(loadBalancerStatusChange{})).
		// A BGPPeer's name and labels decide which pools select it (BGPValid).
		Watches(&v1alpha1.BGPPeer{}, handler.EnqueueRequestsFromMapFunc(r.allPools), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// Several managers share a process in tests, as for the Service controller.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

func (r *Reconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.AddressPoolList
	// Only the names are read: the cache's objects are not copied.
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing address pools")
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}

// statusCoalesce is how long a Service's change waits before its pools' counts are recomputed.
// The work queue holds a key once, so a burst of allocations (a thousand Services created at
// once) costs one status write per pool per period instead of one per Service; those writes
// compete with the Service controller's for the apiserver.
const statusCoalesce = time.Second

// allPoolsLater enqueues every pool statusCoalesce after a Service event.
func (r *Reconciler) allPoolsLater() handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.allPools(ctx, nil) {
			q.AddAfter(req, statusCoalesce)
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc:  func(ctx context.Context, _ event.CreateEvent, q queue) { add(ctx, q) },
		UpdateFunc:  func(ctx context.Context, _ event.UpdateEvent, q queue) { add(ctx, q) },
		DeleteFunc:  func(ctx context.Context, _ event.DeleteEvent, q queue) { add(ctx, q) },
		GenericFunc: func(ctx context.Context, _ event.GenericEvent, q queue) { add(ctx, q) },
	}
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var list v1alpha1.AddressPoolList
	if err := r.Client.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing address pools: %w", err)
	}
	var svcs corev1.ServiceList
	// Every Service's status change brings us here: the Services are only read, so the cache's
	// objects are not copied.
	if err := r.Client.List(ctx, &svcs, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing services: %w", err)
	}
	var held []netip.Addr
	for i := range svcs.Items {
		held = append(held, ingressIPs(&svcs.Items[i])...)
	}
	var bgpPeers v1alpha1.BGPPeerList
	if err := r.Client.List(ctx, &bgpPeers, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing BGP peers: %w", err)
	}
	peers := make(map[string]map[string]string, len(bgpPeers.Items))
	for _, p := range bgpPeers.Items {
		peers[p.Name] = p.Labels
	}
	pools := addresspool.Resolve(list.Items)
	for i := range list.Items {
		ap := &list.Items[i]
		if ap.Name != req.Name {
			continue
		}
		var parsed *addresspool.Pool
		for _, p := range pools {
			if p.Name == ap.Name {
				parsed = p
			}
		}
		return ctrl.Result{}, r.report(ctx, ap, parsed, held, peers)
	}
	return ctrl.Result{}, nil // deleted
}

func (r *Reconciler) report(ctx context.Context, ap *v1alpha1.AddressPool, p *addresspool.Pool, held []netip.Addr, peers map[string]map[string]string) error {
	orig := ap.DeepCopy()
	st := DesiredStatus(ap, p, held, peers)
	if equality.Semantic.DeepEqual(orig.Status, st) {
		return nil
	}
	ap.Status = st
	if err := r.Client.Status().Patch(ctx, ap, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching address pool status: %w", err)
	}
	r.events(orig, ap)
	return nil
}

// DesiredStatus computes a pool's status from its parsed form, the addresses Services hold and
// the cluster's BGPPeers (name -> labels), keeping the transition times of unchanged
// conditions.
func DesiredStatus(ap *v1alpha1.AddressPool, p *addresspool.Pool, held []netip.Addr, peers map[string]map[string]string) v1alpha1.AddressPoolStatus {
	st := *ap.Status.DeepCopy()
	st.ObservedGeneration = ap.Generation
	usage := addresspool.Usage(p, held)
	st.IPv4, st.IPv6 = nil, nil
	if u, ok := usage[corev1.IPv4Protocol]; ok {
		st.IPv4 = &u
	}
	if u, ok := usage[corev1.IPv6Protocol]; ok {
		st.IPv6 = &u
	}
	valid := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "The pool is valid", ObservedGeneration: ap.Generation}
	if len(p.Problems) > 0 {
		msgs := make([]string, len(p.Problems))
		for i, e := range p.Problems {
			msgs[i] = e.Error()
		}
		valid.Status, valid.Reason = metav1.ConditionFalse, ReasonInvalid
		valid.Message = "The pool serves no new allocation (Services keep the addresses they hold): " + strings.Join(msgs, "; ")
	}
	conflict := metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionFalse, Reason: ReasonNoConflict,
		Message: "The pool overlaps no older pool", ObservedGeneration: ap.Generation}
	if len(p.Conflicts) > 0 {
		conflict.Status, conflict.Reason = metav1.ConditionTrue, ReasonOverlapping
		conflict.Message = "The pool overlaps older pool(s) " + strings.Join(p.Conflicts, ", ") +
			" and serves no new allocation (Services keep the addresses they hold)"
	}
	meta.SetStatusCondition(&st.Conditions, valid)
	meta.SetStatusCondition(&st.Conditions, conflict)
	setBGPCondition(&st, ap, peers)
	return st
}

// events reports condition transitions on the pool.
func (r *Reconciler) events(before, after *v1alpha1.AddressPool) {
	if r.Recorder == nil {
		return
	}
	for _, typ := range []string{v1alpha1.ConditionValid, v1alpha1.ConditionConflict, v1alpha1.ConditionBGPValid} {
		old, cur := meta.FindStatusCondition(before.Status.Conditions, typ), meta.FindStatusCondition(after.Status.Conditions, typ)
		if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason && old.Message == cur.Message) {
			continue
		}
		bad := (typ != v1alpha1.ConditionConflict) == (cur.Status == metav1.ConditionFalse)
		switch {
		case bad:
			r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, cur.Reason, "Validate", "%s", cur.Message)
		case old != nil && old.Status != cur.Status:
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, cur.Reason, "Validate", "%s", cur.Message)
		}
	}
}

func ingressIPs(svc *corev1.Service) []netip.Addr {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// loadBalancerStatusChange passes Service events that can change what a Service holds.
type loadBalancerStatusChange struct{ predicate.Funcs }

func (loadBalancerStatusChange) Update(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*corev1.Service), e.ObjectNew.(*corev1.Service)
	if o == nil || n == nil {
		return true
	}
	return !equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer) || o.Spec.Type != n.Spec.Type
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// setBGPCondition sets BGPValid from the pool's BGP settings and the BGPPeers they select, or
// removes it when there are none.
func setBGPCondition(st *v1alpha1.AddressPoolStatus, ap *v1alpha1.AddressPool, peers map[string]map[string]string) {
	settings, problems := addresspool.ParseBGP(ap)
	if settings == nil {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionBGPValid)
		return
	}
	problems = append(problems, settings.CheckPeers(peers)...)
	c := metav1.Condition{Type: v1alpha1.ConditionBGPValid, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "The BGP settings are valid", ObservedGeneration: ap.Generation}
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, e := range problems {
			msgs[i] = e.Error()
		}
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalid
		c.Message = "Agents keep advertising with the last valid BGP settings: " + strings.Join(msgs, "; ")
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
