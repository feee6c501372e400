package service

import (
	"context"
	"maps"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
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

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/servicerules"
)

// ControllerName labels the controller's metrics and logs.
const ControllerName = "portico-service"

// SetupWithManager registers the reconciler: Services it serves (or holds) are reconciled on
// change; a Node change that can alter any load balancer's backend set enqueues every Service it
// serves and no other instance holds, and the reconcile calls the provider only for those whose
// model actually changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	relevant := predicate.NewPredicateFuncs(func(o client.Object) bool {
		svc, ok := o.(*corev1.Service)
		if !ok {
			return false
		}
		_, served := r.opts.Ownership.ProviderFor(svc)
		return served || r.opts.Ownership.holder(svc) == heldByMe
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Service{}, builder.WithPredicates(relevant, ignoreStatusOnly{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.ownedServices), builder.WithPredicates(nodeChange{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Several managers share a process in tests (and a leader-election handover
			// test runs two); names are unique per manager, which is what matters.
			SkipNameValidation: ptr.To(true),
			// Upstream's service controller backs off from 5 s to 300 s; start lower so a
			// conflict on a status patch retries quickly.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, 300*time.Second),
		}).
		Complete(r)
}

func (r *Reconciler) ownedServices(ctx context.Context, _ client.Object) []reconcile.Request {
	var list corev1.ServiceList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing services for a node change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		svc := &list.Items[i]
		if _, served := r.opts.Ownership.ProviderFor(svc); served && r.opts.Ownership.holder(svc) <= heldByMe {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// ignoreStatusOnly drops Service updates that changed nothing but status, finalizers or the
// holder record (our own writes): reacting to them would re-run a reconcile that asked for a
// delayed retry.
type ignoreStatusOnly struct{ predicate.Funcs }

func (ignoreStatusOnly) Create(event.CreateEvent) bool   { return true }
func (ignoreStatusOnly) Delete(event.DeleteEvent) bool   { return true }
func (ignoreStatusOnly) Generic(event.GenericEvent) bool { return true }
func (ignoreStatusOnly) Update(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*corev1.Service), e.ObjectNew.(*corev1.Service)
	if o == nil || n == nil {
		return true
	}
	// Services do not bump metadata.generation on spec changes: compare the spec itself.
	return !reflect.DeepEqual(o.Spec, n.Spec) ||
		!reflect.DeepEqual(withoutHolder(o.Annotations), withoutHolder(n.Annotations)) ||
		!reflect.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) ||
		// A status.loadBalancer edited by someone else is put back.
		!reflect.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
}

// nodeChange passes Node events that can change a load balancer's backends: add, delete, and
// updates to eligibility (labels, taints, deletion), addresses or providerID. Readiness and
// heartbeats do not.
type nodeChange struct{ predicate.Funcs }

func (nodeChange) Create(event.CreateEvent) bool   { return true }
func (nodeChange) Delete(event.DeleteEvent) bool   { return true }
func (nodeChange) Generic(event.GenericEvent) bool { return false }
func (nodeChange) Update(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
	if o == nil || n == nil {
		return true
	}
	return servicerules.NodeEligible(o) != servicerules.NodeEligible(n) ||
		!reflect.DeepEqual(o.Labels, n.Labels) ||
		o.Spec.ProviderID != n.Spec.ProviderID ||
		!reflect.DeepEqual(servicerules.NodeAddresses(o), servicerules.NodeAddresses(n))
}

// withoutHolder is a Service's annotations without the holder record the controller writes.
func withoutHolder(a map[string]string) map[string]string {
	if len(a) == 0 {
		return nil
	}
	out := maps.Clone(a)
	delete(out, annotations.Owner)
	delete(out, annotations.Provider)
	if len(out) == 0 {
		return nil // as the API server returns an empty map
	}
	return out
}
