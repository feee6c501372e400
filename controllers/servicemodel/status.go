package servicemodel

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/providers"
)

// ToServiceStatus converts a provider's status to the Service's status.loadBalancer, as
// portico-controller writes it and portico-ccm returns it to the stock service controller.
func ToServiceStatus(st providers.Status) corev1.LoadBalancerStatus {
	var out corev1.LoadBalancerStatus
	for _, in := range st.Ingress {
		ing := corev1.LoadBalancerIngress{Hostname: in.Hostname}
		if in.IP.IsValid() {
			ing.IP = in.IP.String()
		}
		// The API accepts ipMode only next to an ip.
		if in.IPMode != "" && in.IP.IsValid() {
			mode := corev1.LoadBalancerIPMode(in.IPMode)
			ing.IPMode = &mode
		}
		for _, p := range in.Ports {
			msg := p.Error
			ing.Ports = append(ing.Ports, corev1.PortStatus{Port: p.Port, Protocol: corev1.Protocol(p.Protocol), Error: &msg})
		}
		out.Ingress = append(out.Ingress, ing)
	}
	return out
}
