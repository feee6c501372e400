package servicerules

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
)

// SourceRanges are the client ranges allowed to reach svc's load balancer, by upstream's
// precedence: spec.loadBalancerSourceRanges when it is set, else the
// service.beta.kubernetes.io/load-balancer-source-ranges annotation. An empty result without
// errors means "allow everyone".
//
// Any error makes the whole rule invalid: the controller reports the Service as InvalidSpec and
// does not touch its load balancer, and the agent must not enforce a part of the ranges (the
// valid items alone would be a different rule, and none at all would allow everyone). The
// errors are exactly the ones the controller's BuildLoadBalancer reports for this rule, with the same field paths.
func SourceRanges(svc *corev1.Service) ([]netip.Prefix, field.ErrorList) {
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		return ResolveSourceRanges(svc, nil, nil)
	}
	ann, errs := annotations.ParseKey(svc.Annotations, annotations.SourceRanges)
	return ResolveSourceRanges(svc, ann.SourceRanges, errs)
}

// ResolveSourceRanges is SourceRanges for a caller that has already parsed the annotations
// (BuildLoadBalancer): the spec field's ranges when it is set (appending its problems to errs),
// else annRanges, the parsed annotation, with errs as they are.
func ResolveSourceRanges(svc *corev1.Service, annRanges []netip.Prefix, errs field.ErrorList) ([]netip.Prefix, field.ErrorList) {
	if len(svc.Spec.LoadBalancerSourceRanges) == 0 {
		return annRanges, errs
	}
	path := field.NewPath("spec", "loadBalancerSourceRanges")
	var out []netip.Prefix
	for i, r := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), r, "must be a CIDR such as 198.18.0.0/16"))
			continue
		}
		out = append(out, p.Masked())
	}
	return out, errs
}
