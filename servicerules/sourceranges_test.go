package servicerules

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/annotations"
)

func baseService(mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

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
