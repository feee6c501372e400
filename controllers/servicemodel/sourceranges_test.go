package servicemodel

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/servicerules"
)

// TestSourceRangesAgreeWithBuildLoadBalancer: the agent (servicerules.SourceRanges) enforces exactly what the
// controller (BuildLoadBalancer) accepts: the same ranges when the Service is valid, and every
// source-range error the agent sees is one the controller reports.
func TestSourceRangesAgreeWithBuildLoadBalancer(t *testing.T) {
	values := []string{"", "198.18.1.0/24", "198.18.1.0/24, fd00:c613::/48", "bogus", "198.18.1.7", "198.18.1.0/24,198.18.1.9/24", "198.18.1.0/24,"}
	specs := [][]string{nil, {"198.18.2.0/24"}, {"198.18.2.0/24", "nope"}, {" 198.18.3.4/16 "}}
	for _, v := range values {
		for _, sp := range specs {
			svc := baseService(func(s *corev1.Service) {
				if v != "" {
					s.Annotations = map[string]string{annotations.SourceRanges: v}
				}
				s.Spec.LoadBalancerSourceRanges = sp
			})
			ranges, errs := servicerules.SourceRanges(svc)
			lb, lbErrs := BuildLoadBalancer(svc, nil, allCaps, nil)
			all := lbErrs.ToAggregate()
			for _, e := range errs {
				if all == nil || !strings.Contains(all.Error(), e.Error()) {
					t.Errorf("annotation %q spec %q: agent error %q not reported by the controller (%v)", v, sp, e, all)
				}
			}
			if lb != nil && (len(errs) > 0 || !slices.Equal(ranges, lb.SourceRanges)) {
				t.Errorf("annotation %q spec %q: agent %v %v, controller accepted %v", v, sp, ranges, errs, lb.SourceRanges)
			}
			if lb == nil && len(errs) == 0 && len(sp) == 0 && v != "" {
				// Only errors of other rules (the annotation's) may reject a Service the agent
				// accepts; with the annotation in use, its errors are the agent's too.
				t.Errorf("annotation %q spec %q: controller rejects (%v), agent accepts %v", v, sp, all, ranges)
			}
		}
	}
}
