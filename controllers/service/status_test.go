package service

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/providers"
)

func TestToServiceStatus(t *testing.T) {
	st := ToServiceStatus(providers.Status{Ingress: []providers.Ingress{
		{IP: netip.MustParseAddr("198.18.128.1"), IPMode: providers.IPModeVIP,
			Ports: []providers.PortStatus{{Port: 53, Protocol: providers.UDP, Error: "PortAllocationFailed"}}},
		{Hostname: "web-ns-1234.lb.invalid"},
	}})
	if len(st.Ingress) != 2 {
		t.Fatalf("ingress = %+v", st.Ingress)
	}
	a, b := st.Ingress[0], st.Ingress[1]
	if a.IP != "198.18.128.1" || a.IPMode == nil || *a.IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("first ingress = %+v", a)
	}
	if len(a.Ports) != 1 || a.Ports[0].Port != 53 || a.Ports[0].Protocol != corev1.ProtocolUDP || *a.Ports[0].Error != "PortAllocationFailed" {
		t.Errorf("port status = %+v", a.Ports)
	}
	if b.Hostname != "web-ns-1234.lb.invalid" || b.IP != "" || b.IPMode != nil {
		t.Errorf("hostname ingress = %+v (ipMode must be unset without an IP)", b)
	}
}

func TestStatusWritesOnlyOnChange(t *testing.T) {
	var s corev1.ServiceStatus
	lb := ToServiceStatus(providers.Status{Ingress: []providers.Ingress{{IP: netip.MustParseAddr("198.18.128.1")}}})
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

func TestIPModeOnlyWithIP(t *testing.T) {
	st := ToServiceStatus(providers.Status{Ingress: []providers.Ingress{{Hostname: "x.lb.invalid", IPMode: providers.IPModeProxy}}})
	if st.Ingress[0].IPMode != nil {
		t.Errorf("ipMode set on a hostname-only ingress: %v", *st.Ingress[0].IPMode)
	}
}
