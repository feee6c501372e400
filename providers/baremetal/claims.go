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
// wrote a Service's status. Each address maps to who claims it, for messages. The allocator
// hands none of them to a Service (Request.Reserved): an address in a Portico pool that some
// other Service reports or requests is never given to a second Service, whatever wrote it.
type Claims map[netip.Addr]string

// ForeignClaims collects the Claims of svcs, the Services this provider does not serve (owns
// reports false for their class; a nil owns serves every class, so nothing is foreign). A
// Service claims its status.loadBalancer.ingress IPs and what it requests: spec.loadBalancerIP
// and the loadBalancerIPs annotation (Portico's key or an alias). Deleted Services still hold
// their addresses until they are gone.
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
		who := holderName(svc)
		for _, ip := range statusIPs(svc) {
			out.add(ip, who)
		}
		if ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil {
			out.add(ip, who)
		}
		// Only the key and its aliases: other keys' problems are not this reader's business.
		spec, _ := annotations.ParseKey(svc.Annotations, annotations.LoadBalancerIPs)
		for _, ip := range spec.RequestedIPs {
			out.add(ip, who)
		}
	}
	return out
}

func (c Claims) add(ip netip.Addr, who string) {
	ip = ip.Unmap()
	if _, ok := c[ip]; !ok {
		c[ip] = who
	}
}

// holderName names svc and its class for messages: "ns/name (loadBalancerClass x)".
func holderName(svc *corev1.Service) string {
	if c := svc.Spec.LoadBalancerClass; c != nil {
		return fmt.Sprintf("%s/%s (loadBalancerClass %s)", svc.Namespace, svc.Name, *c)
	}
	return fmt.Sprintf("%s/%s (no loadBalancerClass)", svc.Namespace, svc.Name)
}
