package nodeproxy

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// defaultAffinitySeconds is Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds.
const defaultAffinitySeconds = 10800

// ServicePorts turns a Service and its EndpointSlices into the service ports of one family that
// the agent programs on node. Headless and ExternalName Services have none. Pure.
func ServicePorts(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node string, family rules.Family) []*rules.ServicePort {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var clusterIP netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil && family.Contains(a) {
			clusterIP = a
		}
	}
	if !clusterIP.IsValid() {
		return nil // headless, or not of this family
	}
	external := parseAddrs(svc.Spec.ExternalIPs, family)
	var lbIPs []netip.Addr
	var ranges []netip.Prefix
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			// ipMode Proxy: the load balancer delivers to the node, not to the VIP.
			if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
				continue
			}
			if a, err := netip.ParseAddr(ing.IP); err == nil && family.Contains(a) {
				lbIPs = append(lbIPs, a)
			}
		}
		for _, r := range svc.Spec.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && family.Contains(p.Addr()) {
				ranges = append(ranges, p.Masked())
			}
		}
	}
	affinity := 0
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = defaultAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = int(*c.ClientIP.TimeoutSeconds)
		}
	}
	externalLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal

	var out []*rules.ServicePort
	for _, p := range svc.Spec.Ports {
		sp := &rules.ServicePort{
			Namespace: svc.Namespace, Name: svc.Name, PortName: p.Name,
			Protocol:  strings.ToLower(string(p.Protocol)),
			ClusterIP: clusterIP, Port: uint16(p.Port), NodePort: uint16(p.NodePort),
			ExternalIPs: external, LoadBalancerIPs: lbIPs, SourceRanges: ranges,
			ExternalLocal: externalLocal, InternalLocal: internalLocal,
			AffinitySeconds: affinity,
		}
		if sp.Protocol == "" {
			sp.Protocol = "tcp"
		}
		if externalLocal {
			sp.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
		}
		sp.Endpoints = endpointsFor(p, slices, node, family)
		out = append(out, sp)
	}
	return out
}

// endpointsFor collects the endpoints of one service port from the slices of family: the
// port is matched by name and protocol, so named target ports resolve per endpoint.
func endpointsFor(p corev1.ServicePort, slices []*discoveryv1.EndpointSlice, node string, family rules.Family) []rules.Endpoint {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	var out []rules.Endpoint
	for _, s := range slices {
		if !sliceFamily(s.AddressType, family) {
			continue
		}
		var port int32 = -1
		for _, sp := range s.Ports {
			spProto := corev1.ProtocolTCP
			if sp.Protocol != nil {
				spProto = *sp.Protocol
			}
			name := ""
			if sp.Name != nil {
				name = *sp.Name
			}
			if name == p.Name && spProto == proto && sp.Port != nil {
				port = *sp.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			a, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !family.Contains(a) {
				continue
			}
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			out = append(out, rules.Endpoint{
				IP: a, Port: uint16(port),
				Ready: ready && !terminating, Serving: serving, Terminating: terminating,
				Local: e.NodeName != nil && *e.NodeName == node,
			})
		}
	}
	return out
}

func sliceFamily(t discoveryv1.AddressType, f rules.Family) bool {
	return (t == discoveryv1.AddressTypeIPv4 && f == rules.IPv4) || (t == discoveryv1.AddressTypeIPv6 && f == rules.IPv6)
}

func parseAddrs(list []string, f rules.Family) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil && f.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}
