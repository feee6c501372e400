package serviceports

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/servicerules"
)

// Node is what ServicePorts needs to know of the agent's node and of its settings.
type Node struct {
	Name string
	// Zone is the Node's topology.kubernetes.io/zone label ("" when unset).
	Zone string
	// Dead are the nodes membership reports dead (tracker.State.Dead): their endpoints are
	// left out, as if not ready, until Kubernetes catches up, unless that would leave a
	// service port without a ready endpoint (see dropDead).
	Dead map[string]bool
	// ExternalIPs is the agent's externalIPs policy: the addresses of spec.externalIPs it
	// refuses get no rule (see AllowsExternalIP). The zero value allows every address.
	ExternalIPs config.ExternalIPPolicy
}

// NodeOf describes n (a nil Node is known by name only).
func NodeOf(name string, n *corev1.Node) Node {
	out := Node{Name: name}
	if n != nil {
		out.Zone = n.Labels[corev1.LabelTopologyZone]
	}
	return out
}

// ServicePorts turns a Service and its EndpointSlices into the service ports of one family that
// the agent programs on node. Headless and ExternalName Services have none. Pure.
//
// The source ranges and the affinity timeout are servicerules', as the controller applies
// them: spec.loadBalancerSourceRanges, else the load-balancer-source-ranges annotation. When
// they are invalid (the controller reports the Service as InvalidSpec), the ports are marked
// SourceRangesInvalid and no source may reach the LoadBalancer IPs: enforcing the valid items
// alone, or none, would open what the user meant to restrict.
func ServicePorts(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node Node, family rules.Family) []*rules.ServicePort {
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
	var external []netip.Addr
	for _, a := range parseAddrs(svc.Spec.ExternalIPs, family) {
		if AllowsExternalIP(node.ExternalIPs, a) {
			external = append(external, a)
		}
	}
	var lbIPs []netip.Addr
	var ranges []netip.Prefix
	rangesInvalid := false
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
		all, errs := servicerules.SourceRanges(svc)
		rangesInvalid = len(errs) > 0
		if !rangesInvalid {
			for _, p := range all {
				if family.Contains(p.Addr()) {
					ranges = append(ranges, p)
				}
			}
		}
	}
	affinity := int(servicerules.AffinityTimeout(svc).Seconds())
	externalLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal

	var out []*rules.ServicePort
	for _, p := range svc.Spec.Ports {
		sp := &rules.ServicePort{
			Namespace: svc.Namespace, Name: svc.Name, PortName: p.Name,
			Protocol:  strings.ToLower(string(p.Protocol)),
			ClusterIP: clusterIP, Port: uint16(p.Port), NodePort: uint16(p.NodePort),
			ExternalIPs: external, LoadBalancerIPs: lbIPs, SourceRanges: ranges, SourceRangesInvalid: rangesInvalid,
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

// AllowsExternalIP says whether policy lets the agent program a, one of a Service's
// spec.externalIPs: every address with config.ExternalIPsAllow (or the zero policy), none with
// config.ExternalIPsDeny, those within its AllowedCIDRs with config.ExternalIPsCIDRs. An
// IPv4-mapped IPv6 address is judged as the IPv4 address it is.
func AllowsExternalIP(policy config.ExternalIPPolicy, a netip.Addr) bool {
	switch policy.Policy {
	case config.ExternalIPsDeny:
		return false
	case config.ExternalIPsCIDRs:
		a = a.Unmap()
		for _, p := range policy.AllowedCIDRs {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return true
}

// RefusedExternalIPs lists the addresses of the Service's spec.externalIPs that policy keeps
// the agent from programming, in the Service's order; none for a Service that has no rules
// anyway (ExternalName, headless). Each family's ServicePorts leaves exactly these out.
func RefusedExternalIPs(svc *corev1.Service, policy config.ExternalIPPolicy) []string {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	var out []string
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(s); err == nil && !AllowsExternalIP(policy, a) {
			out = append(out, s)
		}
	}
	return out
}

// endpointsFor collects the endpoints of one service port from the slices of family: the
// port is matched by name and protocol, so named target ports resolve per endpoint. Topology
// hints are applied (see applyTopology).
func endpointsFor(p corev1.ServicePort, slices []*discoveryv1.EndpointSlice, node Node, family rules.Family) []rules.Endpoint {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	var out []rules.Endpoint
	var hints []*discoveryv1.EndpointHints // out[i]'s hints
	var onDead []bool                      // out[i] is on a dead node
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
			// Ready as the slice says: true for a terminating endpoint too when the Service
			// publishes not-ready addresses, and such an endpoint is served (as kube-proxy does).
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			out = append(out, rules.Endpoint{
				IP: a, Port: uint16(port),
				Ready: ready, Serving: serving, Terminating: terminating,
				Local: e.NodeName != nil && *e.NodeName == node.Name,
			})
			hints = append(hints, e.Hints)
			onDead = append(onDead, e.NodeName != nil && node.Dead[*e.NodeName])
		}
	}
	out, hints = dropDead(out, hints, onDead)
	applyTopology(out, hints, node)
	return out
}

// dropDead leaves out the endpoints on dead nodes, unless no ready endpoint would remain:
// then all are kept, since a wrong view (this node being the one cut off) must not turn a
// working service into one that rejects everything.
func dropDead(eps []rules.Endpoint, hints []*discoveryv1.EndpointHints, onDead []bool) ([]rules.Endpoint, []*discoveryv1.EndpointHints) {
	if !slices.Contains(onDead, true) {
		return eps, hints
	}
	var keptEps []rules.Endpoint
	var keptHints []*discoveryv1.EndpointHints
	readyLeft := false
	for i, e := range eps {
		if onDead[i] {
			continue
		}
		keptEps, keptHints = append(keptEps, e), append(keptHints, hints[i])
		readyLeft = readyLeft || e.Ready
	}
	if !readyLeft {
		return eps, hints
	}
	return keptEps, keptHints
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
