package baremetal

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/annotations"
)

// Claims are the addresses held or asked for by LoadBalancer Services this provider does not
// serve: another class of the same controller, a second Portico binary (portico-ccm beside
// portico-controller), another implementation (MetalLB, kube-vip, a cloud's CCM), or anyone who
// wrote a Service's status. Each address maps to the Service that claims it. The allocator
// hands none of them to a Service (Request.Reserved): an address in a Portico pool that some
// other Service reports or requests is never given to a second Service, whatever wrote it.
type Claims map[netip.Addr]Holder

// Holder is the Service that claims an address.
type Holder struct {
	Namespace, Name string
	Class           *string
}

// String names the Service and its class for messages: "ns/name (loadBalancerClass x)".
func (h Holder) String() string {
	if h.Class != nil {
		return fmt.Sprintf("%s/%s (loadBalancerClass %s)", h.Namespace, h.Name, *h.Class)
	}
	return fmt.Sprintf("%s/%s (no loadBalancerClass)", h.Namespace, h.Name)
}

// requestKeys are the loadBalancerIPs annotation and its aliases.
var requestKeys = func() []string {
	for _, k := range annotations.Keys {
		if k.Name == annotations.LoadBalancerIPs {
			return append([]string{k.Name}, k.Aliases...)
		}
	}
	panic("annotations: no " + annotations.LoadBalancerIPs)
}()

// ForeignClaims collects the Claims of svcs, the Services this provider does not serve (owns
// reports false for their class; a nil owns serves every class, so nothing is foreign). A
// Service claims its status.loadBalancer.ingress IPs and what it requests: spec.loadBalancerIP
// and the loadBalancerIPs annotation (Portico's key or an alias). Deleted Services still hold
// their addresses until they are gone. It runs on every Ensure over every Service, so it
// allocates only for what it finds.
func ForeignClaims(svcs []corev1.Service, owns func(class *string) bool) Claims {
	out := Claims{}
	if owns == nil {
		return out
	}
	for i := range svcs {
		svc := &svcs[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || owns(svc.Spec.LoadBalancerClass) {
			continue
		}
		who := Holder{Namespace: svc.Namespace, Name: svc.Name, Class: svc.Spec.LoadBalancerClass}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil {
				out.add(ip, who)
			}
		}
		if ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil {
			out.add(ip, who)
		}
		if !hasRequest(svc.Annotations) {
			continue
		}
		// Only the key and its aliases: other keys' problems are not this reader's business.
		spec, _ := annotations.ParseKey(svc.Annotations, annotations.LoadBalancerIPs)
		for _, ip := range spec.RequestedIPs {
			out.add(ip, who)
		}
	}
	return out
}

func hasRequest(ann map[string]string) bool {
	for _, k := range requestKeys {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

func (c Claims) add(ip netip.Addr, who Holder) {
	ip = ip.Unmap()
	if _, ok := c[ip]; !ok {
		c[ip] = who
	}
}
