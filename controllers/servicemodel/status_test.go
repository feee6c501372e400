package servicemodel

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

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

func TestIPModeOnlyWithIP(t *testing.T) {
	st := ToServiceStatus(providers.Status{Ingress: []providers.Ingress{{Hostname: "x.lb.invalid", IPMode: providers.IPModeProxy}}})
	if st.Ingress[0].IPMode != nil {
		t.Errorf("ipMode set on a hostname-only ingress: %v", *st.Ingress[0].IPMode)
	}
}
