package servicerules

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAffinityTimeout(t *testing.T) {
	cases := []struct {
		name string
		svc  *corev1.Service
		want time.Duration
	}{
		{"no affinity", baseService(), 0},
		{"ClientIP default", baseService(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }), 10800 * time.Second},
		{"ClientIP with timeout", baseService(func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
		}), 30 * time.Second},
		{"timeout without ClientIP", baseService(func(s *corev1.Service) {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
		}), 0},
	}
	for _, c := range cases {
		if got := AffinityTimeout(c.svc); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
