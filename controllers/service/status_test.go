package service

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/providers"
)

func TestStatusWritesOnlyOnChange(t *testing.T) {
	var s corev1.ServiceStatus
	lb := servicemodel.ToServiceStatus(providers.Status{Ingress: []providers.Ingress{{IP: netip.MustParseAddr("198.18.128.1")}}})
	if !setLoadBalancerStatus(&s, lb) || setLoadBalancerStatus(&s, lb) {
		t.Error("setLoadBalancerStatus must report a change once")
	}
	if !setCondition(&s, 1, true, ReasonProvisioned, "ok") || setCondition(&s, 1, true, ReasonProvisioned, "ok") {
		t.Error("setCondition must report a change once")
	}
	if !setCondition(&s, 1, false, ReasonInvalidSpec, "bad") || s.Conditions[0].Status != metav1.ConditionFalse {
		t.Errorf("condition = %+v", s.Conditions)
	}
}
