package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/servicerules"
)

// Options configure the Reconciler.
type Options struct {
	Ownership Ownership
	// Providers by name. Every provider named in Ownership must be present.
	Providers map[string]providers.Provider
	// ResyncPeriod re-ensures a load balancer whose model did not change, so that the provider
	// repairs drift. 0 disables it.
	ResyncPeriod time.Duration
	// IgnoreExcludeLB reads Nodes without the exclude-from-external-load-balancers label
	// (servicerules.IgnoreExcludeLabel).
	IgnoreExcludeLB bool
	Recorder        events.EventRecorder
	Metrics         *Metrics
}

// Reconciler reconciles LoadBalancer Services in four steps: observe, build the desired model,
// apply it through the provider, report through status and Events.
type Reconciler struct {
	client client.Client
	opts   Options

	mu      sync.Mutex
	applied map[types.NamespacedName]applied
}

// applied remembers the last model a provider converged to, so that an unchanged Service (for
// example after a node event that does not affect it) costs no provider call.
type applied struct {
	hash   string
	at     time.Time
	status corev1.LoadBalancerStatus
}

// NewReconciler returns a Reconciler; it checks that every owned class has its provider.
func NewReconciler(c client.Client, opts Options) (*Reconciler, error) {
	if opts.Ownership.Instance == "" {
		return nil, errors.New("the instance name recorded on Services is empty")
	}
	names := []string{opts.Ownership.Classless}
	for _, p := range opts.Ownership.Classes {
		names = append(names, p)
	}
	for _, n := range names {
		if _, ok := opts.Providers[n]; n != "" && !ok {
			return nil, fmt.Errorf("provider %q is not configured", n)
		}
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	return &Reconciler{client: c, opts: opts, applied: map[types.NamespacedName]applied{}}, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	if err := r.client.Get(ctx, req.NamespacedName, svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	providerName, served := r.opts.Ownership.ProviderFor(svc)
	gone := svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer
	switch r.opts.Ownership.holder(svc) {
	case heldByOther, heldUnclaimed:
		// Another instance's: never touched, even when this one serves the class too.
		log.FromContext(ctx).V(1).Info("service held by another instance", "owner", svc.Annotations[annotations.Owner])
		return ctrl.Result{}, nil
	case heldByMe:
		// Only the Service's deletion or its type leaving LoadBalancer deletes the load
		// balancer; a class this instance no longer serves keeps it.
		if gone {
			return ctrl.Result{}, r.cleanup(ctx, svc, providerName)
		}
		if !served {
			return r.notServed(ctx, svc)
		}
	case heldByNone:
		if gone || !served {
			return ctrl.Result{}, nil
		}
	}
	return r.ensure(ctx, svc, providerName)
}

// notServed reports a Service this instance holds but does not serve; its load balancer and
// status stay as they are.
func (r *Reconciler) notServed(ctx context.Context, svc *corev1.Service) (ctrl.Result, error) {
	r.forget(client.ObjectKeyFromObject(svc))
	msg := r.opts.Ownership.notServedMessage(svc)
	changed, err := r.reportNotReady(ctx, svc, ReasonClassNotServed, msg)
	if changed {
		r.event(svc, corev1.EventTypeWarning, EventClassNotServed, eventActionEnsure, msg)
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) ensure(ctx context.Context, svc *corev1.Service, providerName string) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	p := r.opts.Providers[providerName]
	key := client.ObjectKeyFromObject(svc)

	// Observe.
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	if r.opts.IgnoreExcludeLB {
		for i := range nodes.Items {
			servicerules.IgnoreExcludeLabel(&nodes.Items[i])
		}
	}

	// Build the desired model (pure). Invalid input never reaches the provider and never tears
	// down what already works.
	lb, errs := servicemodel.BuildLoadBalancer(svc, nodes.Items, p.Capabilities(), p.ParseOptions)
	if len(errs) > 0 {
		// Reported once per distinct problem, not on every reconcile (node events requeue it).
		msg := errorListMessage(errs)
		changed, err := r.reportNotReady(ctx, svc, ReasonInvalidSpec, invalidMessage(svc, msg))
		if changed {
			r.event(svc, corev1.EventTypeWarning, EventInvalidSpec, eventActionValidate, msg)
		}
		return ctrl.Result{}, err
	}

	// The finalizer and the holder record go on before any provider call.
	if orig := svc.DeepCopy(); r.opts.Ownership.claim(svc, providerName) {
		if err := r.client.Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	hash := modelHash(lb)
	prev, known := r.lookup(key)
	driftDue := r.opts.ResyncPeriod > 0 && time.Since(prev.at) >= r.opts.ResyncPeriod
	var status corev1.LoadBalancerStatus
	pending := false
	if known && prev.hash == hash && !driftDue {
		status = prev.status
	} else {
		// Apply.
		changed := !known || prev.hash != hash
		if changed {
			r.event(svc, corev1.EventTypeNormal, EventEnsuring, eventActionEnsure, "Ensuring load balancer")
			if len(lb.Nodes) == 0 {
				r.event(svc, corev1.EventTypeWarning, EventNoNodes, eventActionSelectNod, "There are no available nodes for LoadBalancer")
			}
		}
		st, err := r.callEnsure(ctx, p, lb)
		if err != nil {
			return r.ensureFailed(ctx, svc, err)
		}
		status = servicemodel.ToServiceStatus(st)
		if st.ReplacementPending {
			// The provider deletes the load balancer it replaced once the status names the new
			// one: write it, then call Ensure again (nothing remembered, so the hash matches not).
			pending = true
			r.forget(key)
		} else {
			r.remember(key, applied{hash: hash, at: time.Now(), status: status})
		}
		if changed {
			// Warnings are reported when the model changes, not on every drift resync.
			for _, w := range st.Warnings {
				r.event(svc, corev1.EventTypeWarning, EventSettingIgnored, eventActionEnsure, w)
			}
			r.event(svc, corev1.EventTypeNormal, EventEnsured, eventActionEnsure, "Ensured load balancer")
		}
		logger.V(1).Info("ensured load balancer", "provider", p.Name(), "changed", changed)
	}

	// Report.
	if err := r.reportReady(ctx, svc, status); err != nil {
		return ctrl.Result{}, err
	}
	if pending {
		return ctrl.Result{RequeueAfter: replacementRecheck}, nil
	}
	return ctrl.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}

// replacementRecheck is how soon Ensure is called again after a status that names a
// replacement load balancer was written (providers.Status.ReplacementPending).
const replacementRecheck = time.Second

// ensureFailed maps a provider error to a result, in one place: invalid input is terminal,
// RetryError waits its fixed delay, anything else backs off exponentially.
func (r *Reconciler) ensureFailed(ctx context.Context, svc *corev1.Service, err error) (ctrl.Result, error) {
	var invalid *providers.InvalidError
	var retry *providers.RetryError
	switch {
	case errors.As(err, &invalid):
		r.event(svc, corev1.EventTypeWarning, EventInvalidSpec, eventActionEnsure, invalid.Error())
		_, rerr := r.reportNotReady(ctx, svc, ReasonInvalidSpec, invalidMessage(svc, invalid.Error()))
		return ctrl.Result{}, errors.Join(rerr, reconcile.TerminalError(err))
	case errors.As(err, &retry):
		r.event(svc, corev1.EventTypeNormal, ReasonPending, eventActionEnsure, retry.Reason)
		if _, rerr := r.reportNotReady(ctx, svc, ReasonPending, retry.Reason); rerr != nil {
			return ctrl.Result{}, rerr
		}
		return ctrl.Result{RequeueAfter: retry.After}, nil
	default:
		msg := fmt.Sprintf("Error syncing load balancer: %v", err)
		r.event(svc, corev1.EventTypeWarning, EventSyncFailed, eventActionEnsure, msg)
		_, rerr := r.reportNotReady(ctx, svc, ReasonProviderError, msg)
		return ctrl.Result{}, errors.Join(rerr, err)
	}
}

func invalidMessage(svc *corev1.Service, msg string) string {
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return "The Service is invalid; the load balancer keeps its last applied configuration: " + msg
	}
	return "The Service is invalid: " + msg
}

// cleanup deletes the load balancer through the provider that made it, clears the status and
// removes the finalizer and the holder record. The provider is the one recorded on the Service,
// else the one serving it; when neither is known (a Service from before providers were recorded,
// whose type change wiped its class) every configured provider is asked: Delete of what does not
// exist succeeds by contract. A recorded provider this instance does not run is a terminal
// error: the finalizer stays until it runs it again or `orphans --delete` runs with it.
func (r *Reconciler) cleanup(ctx context.Context, svc *corev1.Service, providerName string) error {
	ref := providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
	if _, recorded := annotations.OwnerOf(svc.Annotations); recorded != "" {
		providerName = recorded
	}
	targets := []string{providerName}
	if providerName == "" {
		targets = targets[:0]
		for name := range r.opts.Providers {
			targets = append(targets, name)
		}
		sort.Strings(targets)
	} else if r.opts.Providers[providerName] == nil {
		msg := fmt.Sprintf("Error deleting load balancer: provider %s, which made it, is not configured in instance %s", providerName, r.opts.Ownership.Instance)
		r.event(svc, corev1.EventTypeWarning, EventDeleteFailed, eventActionDelete, msg)
		return reconcile.TerminalError(errors.New(msg))
	}
	r.event(svc, corev1.EventTypeNormal, EventDeleting, eventActionDelete, "Deleting load balancer")
	for _, name := range targets {
		if err := r.callDelete(ctx, r.opts.Providers[name], ref); err != nil {
			r.event(svc, corev1.EventTypeWarning, EventDeleteFailed, eventActionDelete, fmt.Sprintf("Error deleting load balancer: %v", err))
			return fmt.Errorf("deleting load balancer with provider %s: %w", name, err)
		}
	}
	r.forget(client.ObjectKeyFromObject(svc))

	orig := svc.DeepCopy()
	changed := setLoadBalancerStatus(&svc.Status, corev1.LoadBalancerStatus{})
	changed = meta.RemoveStatusCondition(&svc.Status.Conditions, ConditionReady) || changed
	if changed {
		if err := r.client.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("clearing status: %w", err)
		}
	}
	orig = svc.DeepCopy()
	r.opts.Ownership.release(svc)
	if err := r.client.Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	r.event(svc, corev1.EventTypeNormal, EventDeleted, eventActionDelete, "Deleted load balancer")
	return nil
}

func (r *Reconciler) reportReady(ctx context.Context, svc *corev1.Service, lb corev1.LoadBalancerStatus) error {
	orig := svc.DeepCopy()
	changed := setLoadBalancerStatus(&svc.Status, lb)
	changed = setCondition(&svc.Status, svc.Generation, true, ReasonProvisioned, "The load balancer is provisioned") || changed
	return r.patchStatus(ctx, orig, svc, changed)
}

// reportNotReady sets the condition to False and leaves status.loadBalancer untouched: what
// already serves traffic keeps being reported. It reports whether the condition changed.
func (r *Reconciler) reportNotReady(ctx context.Context, svc *corev1.Service, reason, msg string) (bool, error) {
	orig := svc.DeepCopy()
	changed := setCondition(&svc.Status, svc.Generation, false, reason, msg)
	return changed, r.patchStatus(ctx, orig, svc, changed)
}

func (r *Reconciler) patchStatus(ctx context.Context, orig, svc *corev1.Service, changed bool) error {
	if !changed {
		return nil
	}
	if err := r.client.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

func (r *Reconciler) event(svc *corev1.Service, typ, reason, action, note string) {
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(svc, nil, typ, reason, action, "%s", note)
	}
}

func (r *Reconciler) callEnsure(ctx context.Context, p providers.Provider, lb *providers.LoadBalancer) (providers.Status, error) {
	start := time.Now()
	st, err := p.Ensure(ctx, lb)
	r.opts.Metrics.observeCall(p.Name(), "ensure", start, err)
	return st, err
}

func (r *Reconciler) callDelete(ctx context.Context, p providers.Provider, ref providers.Ref) error {
	start := time.Now()
	err := p.Delete(ctx, ref)
	r.opts.Metrics.observeCall(p.Name(), "delete", start, err)
	return err
}

func (r *Reconciler) lookup(key types.NamespacedName) (applied, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.applied[key]
	return a, ok
}

func (r *Reconciler) remember(key types.NamespacedName, a applied) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied[key] = a
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.applied, key)
}

// modelHash identifies a desired load balancer; equal hashes need no provider call.
func modelHash(lb *providers.LoadBalancer) string {
	b, err := json.Marshal(lb)
	if err != nil {
		// Every field of the model is marshalable; this cannot happen.
		panic(fmt.Sprintf("marshalling load balancer model: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var _ reconcile.Reconciler = (*Reconciler)(nil)
