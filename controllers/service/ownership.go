package service

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/portico-lb/portico/annotations"
)

// Finalizer holds a Service with a loadBalancerClass until its load balancer is gone.
const Finalizer = "portico-lb.io/load-balancer-cleanup"

// StockFinalizer is the upstream service controller's finalizer. When the controller owns
// class-less Services it is their load-balancer controller in place of the upstream one, so it
// uses this finalizer for them, as cloud-provider does: a cluster moving from the upstream
// controller keeps the finalizer its Services carry (it is adopted, and removed after the load
// balancer is deleted, instead of holding a deletion forever), and tools and tests that wait for
// it see it. For Services with a class, and when the controller does not own class-less
// Services (and did not provision the Service), this finalizer belongs to another controller and
// is never touched.
const StockFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// Ownership decides which Services the controller serves, which provider serves each, and
// which Services it holds.
//
// Serving and holding differ. The controller serves the LoadBalancer Services of its classes
// (ProviderFor). It holds a Service once it has put its finalizer on it, and records itself as
// the holder (annotations.Owner, with the provider in annotations.Provider). Only the holder
// changes or deletes a load balancer, and it deletes it only when the Service is deleted or its
// type leaves LoadBalancer (the class of a LoadBalancer Service cannot change). A held Service
// it no longer serves (its class was removed from the configuration) keeps its load balancer
// and is reported (ReasonClassNotServed) until it is deleted, served again, or deleted by
// `portico-controller orphans --delete`.
type Ownership struct {
	// Instance is the name recorded as the holder of the Services this controller provisions
	// (config.Controller.InstanceName). Two controllers on one cluster must have different ones.
	Instance string
	// Classes maps a loadBalancerClass to a provider name.
	Classes map[string]string
	// Classless, if set, is the provider for Services without a class.
	Classless string
}

// ProviderFor returns the provider name for svc, or false when svc is not a LoadBalancer
// Service this controller serves.
func (o Ownership) ProviderFor(svc *corev1.Service) (string, bool) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return "", false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return o.Classless, o.Classless != ""
	}
	p, ok := o.Classes[*svc.Spec.LoadBalancerClass]
	return p, ok
}

// holding says who holds a Service, as seen by one controller instance.
type holding int

const (
	// heldByNone: no finalizer of a Portico controller (a new Service, or another
	// implementation's).
	heldByNone holding = iota
	// heldByMe: this instance holds it (recorded, or adopted: see holder).
	heldByMe
	// heldByOther: another instance is recorded as its holder.
	heldByOther
	// heldUnclaimed: a Portico finalizer with no holder recorded, on a Service this instance
	// does not serve: another instance's from before holders were recorded, or an orphan of
	// such a release. Never touched; `orphans` lists it.
	heldUnclaimed
)

// holder says who holds svc.
func (o Ownership) holder(svc *corev1.Service) holding {
	owner, _ := annotations.OwnerOf(svc.Annotations)
	if owner != "" && owner != o.Instance {
		return heldByOther
	}
	if !o.carriesFinalizer(svc, owner) {
		return heldByNone
	}
	if owner == o.Instance {
		return heldByMe
	}
	// No holder recorded: provisioned by a Portico from before holders were recorded (or, with
	// the stock finalizer, by the stock service controller). The instance serving its class
	// adopts it.
	if _, served := o.ProviderFor(svc); served {
		return heldByMe
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		// The type change wiped the class, so nothing says whose it was: as before holders
		// were recorded, the first instance to see it deletes its load balancer. Every
		// instance records itself on the Services it serves as soon as it starts, so only a
		// Service changed in that moment gets here.
		return heldByMe
	}
	return heldUnclaimed
}

// carriesFinalizer tells whether svc carries a finalizer a Portico controller instance may hold:
// Finalizer, or the stock one on a class-less Service when this instance owns class-less
// Services or is the recorded holder.
func (o Ownership) carriesFinalizer(svc *corev1.Service, owner string) bool {
	if controllerutil.ContainsFinalizer(svc, Finalizer) {
		return true
	}
	return svc.Spec.LoadBalancerClass == nil && controllerutil.ContainsFinalizer(svc, StockFinalizer) &&
		(o.Classless != "" || (owner != "" && owner == o.Instance))
}

// finalizerFor is the finalizer the controller puts on svc when it owns it.
func (o Ownership) finalizerFor(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerClass == nil && o.Classless != "" {
		return StockFinalizer
	}
	return Finalizer
}

// claim makes svc carry the controller's finalizer for it and record this instance and
// provider as its holder; a class-less Service from before StockFinalizer was used for them
// trades Finalizer for it. It reports whether anything changed.
func (o Ownership) claim(svc *corev1.Service, provider string) bool {
	want := o.finalizerFor(svc)
	changed := controllerutil.AddFinalizer(svc, want)
	if want == StockFinalizer {
		changed = controllerutil.RemoveFinalizer(svc, Finalizer) || changed
	}
	for k, v := range map[string]string{annotations.Owner: o.Instance, annotations.Provider: provider} {
		if svc.Annotations[k] != v {
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			svc.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// release removes what claim put on svc: the finalizers this instance holds it with and the
// holder record. It reports whether anything changed.
func (o Ownership) release(svc *corev1.Service) bool {
	owner, _ := annotations.OwnerOf(svc.Annotations)
	changed := false
	if o.carriesFinalizer(svc, owner) && svc.Spec.LoadBalancerClass == nil {
		changed = controllerutil.RemoveFinalizer(svc, StockFinalizer)
	}
	changed = controllerutil.RemoveFinalizer(svc, Finalizer) || changed
	for _, k := range []string{annotations.Owner, annotations.Provider} {
		if _, ok := svc.Annotations[k]; ok {
			delete(svc.Annotations, k)
			changed = true
		}
	}
	return changed
}

// Served describes what the instance serves, for messages: `"a", "b" and Services without a
// class`.
func (o Ownership) Served() string {
	classes := make([]string, 0, len(o.Classes))
	for c := range o.Classes {
		classes = append(classes, fmt.Sprintf("%q", c))
	}
	sort.Strings(classes)
	if o.Classless != "" {
		classes = append(classes, "Services without a class")
	}
	if len(classes) == 0 {
		return "no class"
	}
	if len(classes) == 1 {
		return classes[0]
	}
	return strings.Join(classes[:len(classes)-1], ", ") + " and " + classes[len(classes)-1]
}

// notServedMessage says that no controller serves svc's class any more, what this instance
// serves, and what keeps or deletes the load balancer.
func (o Ownership) notServedMessage(svc *corev1.Service) string {
	class := "Services without a loadBalancerClass"
	if svc.Spec.LoadBalancerClass != nil {
		class = fmt.Sprintf("loadBalancerClass %q", *svc.Spec.LoadBalancerClass)
	}
	return fmt.Sprintf("No Portico controller serves %s: instance %s, which provisioned this load balancer, serves %s. "+
		"The load balancer is kept as it is: deleting the Service or changing its type from LoadBalancer deletes it, "+
		"serving the class again resumes its updates, and `portico-controller orphans --delete` deletes it",
		class, o.Instance, o.Served())
}
