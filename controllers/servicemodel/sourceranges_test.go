package servicemodel

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/annotations"
)

func TestSourceRanges(t *testing.T) {
	withAnn := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations = map[string]string{annotations.SourceRanges: v} }
	}
	withSpec := func(v ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = v }
	}
	tests := []struct {
		name    string
		svc     *corev1.Service
		want    []string // the ranges, when valid
		wantErr []string // field paths, when invalid
	}{
		{name: "none: everyone", svc: baseService()},
		{name: "spec", svc: baseService(withSpec("198.18.2.7/24", " fd00:c613::/64 ")), want: []string{"198.18.2.0/24", "fd00:c613::/64"}},
		{name: "annotation alone", svc: baseService(withAnn("198.18.1.0/24, 198.19.0.1/32")), want: []string{"198.18.1.0/24", "198.19.0.1/32"}},
		{name: "spec wins over the annotation", svc: baseService(withAnn("198.18.1.0/24"), withSpec("198.18.2.0/24")), want: []string{"198.18.2.0/24"}},
		{name: "spec wins over an invalid annotation", svc: baseService(withAnn("bogus"), withSpec("198.18.2.0/24")), want: []string{"198.18.2.0/24"}},
		{name: "invalid spec item", svc: baseService(withSpec("198.18.2.0/24", "nope")), wantErr: []string{"spec.loadBalancerSourceRanges[1]"}},
		{name: "invalid spec item, valid annotation", svc: baseService(withAnn("198.18.1.0/24"), withSpec("nope")), wantErr: []string{"spec.loadBalancerSourceRanges[0]"}},
		{name: "invalid annotation item", svc: baseService(withAnn("198.18.1.0/24, bogus")), wantErr: []string{"metadata.annotations[" + annotations.SourceRanges + "]"}},
		{name: "annotation duplicate after masking", svc: baseService(withAnn("198.18.1.0/24, 198.18.1.7/24")), wantErr: []string{"metadata.annotations[" + annotations.SourceRanges + "]"}},
		{name: "annotation bare IP", svc: baseService(withAnn("198.18.1.7")), wantErr: []string{"metadata.annotations[" + annotations.SourceRanges + "]"}},
		{name: "other annotations do not matter", svc: baseService(withSpec("198.18.2.0/24"), func(s *corev1.Service) {
			s.Annotations = map[string]string{annotations.Internal: "yes"}
		}), want: []string{"198.18.2.0/24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := SourceRanges(tt.svc)
			if len(tt.wantErr) > 0 {
				if len(errs) != len(tt.wantErr) {
					t.Fatalf("errors %v, want one per %v", errs, tt.wantErr)
				}
				for i, e := range errs {
					if e.Field != tt.wantErr[i] {
						t.Errorf("error %d at %s, want %s", i, e.Field, tt.wantErr[i])
					}
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected errors: %v", errs)
			}
			var want []netip.Prefix
			for _, w := range tt.want {
				want = append(want, netip.MustParsePrefix(w))
			}
			if !slices.Equal(got, want) {
				t.Errorf("ranges %v, want %v", got, want)
			}
		})
	}
}

// TestSourceRangesAgreeWithBuildLoadBalancer: the agent (SourceRanges) enforces exactly what the
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
			ranges, errs := SourceRanges(svc)
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

func TestNodeBeingDeleted(t *testing.T) {
	if NodeBeingDeleted(&corev1.Node{}) {
		t.Error("a plain node is not being deleted")
	}
	tainted := node("t", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	})
	excluded := node("x", func(n *corev1.Node) { n.Labels = map[string]string{ExcludeFromLBLabel: "true"} })
	if !NodeBeingDeleted(&tainted) || NodeBeingDeleted(&excluded) {
		t.Errorf("tainted: %v (want true), excluded: %v (want false: excluded is not deleted)", NodeBeingDeleted(&tainted), NodeBeingDeleted(&excluded))
	}
}
