package announce

import (
	"slices"
)

// Classes are the Services whose load-balancer addresses the agent announces: those of the
// loadBalancerClasses a Portico bare-metal provider serves (Names), and class-less Services
// when Portico serves them (Classless: portico-ccm with the baremetal provider, or
// portico-controller's classless provider). A VIP held only by other Services is left alone,
// even inside an AddressPool: another implementation's address, or one that anyone allowed to
// write services/status put into a Service's status, never draws traffic to the nodes.
//
// Why the class and not a mark in the Service's status: everything in the status (the ingress
// IPs, ipMode, conditions) is written through services/status, so whoever may write it could
// also forge a mark there. spec.loadBalancerClass is written with the Service itself (services
// create or update, never services/status) and cannot change once set, so a holder of
// services/status alone cannot move a Service into a Portico class. Finalizers would not do
// either: class-less Services carry the stock service controller's finalizer, which every
// cloud-controller-manager puts on them, Portico's or not. The configuration says which classes
// are Portico's, as the controller's --class and --classless-provider do (the chart derives
// both from the same values).
type Classes struct {
	Names     []string
	Classless bool
}

// Announces reports whether a LoadBalancer Service of class (nil: class-less) is one whose
// addresses the agent announces.
func (c Classes) Announces(class *string) bool {
	if class == nil {
		return c.Classless
	}
	return slices.Contains(c.Names, *class)
}
