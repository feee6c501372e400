package servicemodel

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/servicerules"
)

// BuildLoadBalancer turns a Service and the cluster's nodes into the complete desired load
// balancer for a provider with caps whose own annotation keys parseOptions reads (the provider's
// ParseOptions; nil for none), or every reason it cannot, each with its field path. It is the
// pure step of portico-controller's reconcile and of portico-ccm's EnsureLoadBalancer.
func BuildLoadBalancer(svc *corev1.Service, nodes []corev1.Node, caps providers.Capabilities,
	parseOptions func(annotations map[string]string) (providers.ServiceOptions, field.ErrorList)) (*providers.LoadBalancer, field.ErrorList) {
	spec := field.NewPath("spec")
	ann, errs := annotations.Parse(svc.Annotations)
	var opts providers.ServiceOptions
	if parseOptions != nil {
		var optErrs field.ErrorList
		opts, optErrs = parseOptions(svc.Annotations)
		errs = append(errs, optErrs...)
	}
	lb := &providers.LoadBalancer{
		Ref:                 providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)},
		Internal:            ann.Internal,
		LocalTrafficOnly:    svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		HealthCheckNodePort: svc.Spec.HealthCheckNodePort,
		Options:             opts,
		Nodes:               EligibleNodes(nodes),
		Labels:              svc.Labels,
		Selector:            svc.Spec.Selector,
		CurrentIPs:          ingressIPs(svc),
		CurrentHostnames:    ingressHostnames(svc),
	}
	if p := svc.Spec.IPFamilyPolicy; p != nil {
		lb.IPFamilyPolicy = providers.IPFamilyPolicy(*p)
	}
	if svc.Spec.LoadBalancerClass != nil {
		lb.Class = *svc.Spec.LoadBalancerClass
	}

	lb.Ports, errs = buildPorts(svc, caps, spec, errs)
	lb.SourceRanges, errs = servicerules.ResolveSourceRanges(svc, ann.SourceRanges, errs)
	lb.RequestedIPs, errs = buildRequestedIPs(svc, ann, caps, spec, errs)
	lb.IPFamilies, errs = buildFamilies(svc, caps, spec, errs)

	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if !caps.SessionAffinity {
			errs = append(errs, field.NotSupported(spec.Child("sessionAffinity"), svc.Spec.SessionAffinity, []string{string(corev1.ServiceAffinityNone)}))
		}
		lb.SessionAffinity = providers.SessionAffinity{ClientIP: true, Timeout: servicerules.AffinityTimeout(svc)}
	}
	if lb.LocalTrafficOnly && lb.HealthCheckNodePort == 0 && allocatesNodePorts(svc) {
		errs = append(errs, field.Required(spec.Child("healthCheckNodePort"), "externalTrafficPolicy=Local needs a health-check node port"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return lb, nil
}

// ingressIPs returns the IPs status.loadBalancer.ingress reports, in order.
func ingressIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// ingressHostnames returns the hostnames status.loadBalancer.ingress reports, in order.
func ingressHostnames(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	return out
}

func allocatesNodePorts(svc *corev1.Service) bool {
	return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
}

func buildPorts(svc *corev1.Service, caps providers.Capabilities, spec *field.Path, errs field.ErrorList) ([]providers.Port, field.ErrorList) {
	var ports []providers.Port
	protocols := map[corev1.Protocol]bool{}
	if len(svc.Spec.Ports) == 0 {
		errs = append(errs, field.Required(spec.Child("ports"), "a LoadBalancer Service needs at least one port"))
	}
	for i, p := range svc.Spec.Ports {
		path := spec.Child("ports").Index(i)
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		protocols[proto] = true
		if caps.Protocols != nil && !slices.Contains(caps.Protocols, providers.Protocol(proto)) {
			errs = append(errs, field.NotSupported(path.Child("protocol"), proto, protocolNames(caps.Protocols)))
		}
		if caps.NeedsNodePorts && p.NodePort == 0 {
			errs = append(errs, field.Invalid(path.Child("nodePort"), p.NodePort,
				"this load balancer forwards to node ports; set spec.allocateLoadBalancerNodePorts=true (or remove it) so every port gets one"))
		}
		ports = append(ports, providers.Port{Name: p.Name, Protocol: providers.Protocol(proto), Port: p.Port, NodePort: p.NodePort})
	}
	if len(protocols) > 1 && !caps.MixedProtocols {
		errs = append(errs, field.Invalid(spec.Child("ports"), fmt.Sprintf("%d protocols", len(protocols)),
			"this load balancer cannot serve different protocols on one Service; split the Service"))
	}
	return ports, errs
}

func protocolNames(ps []providers.Protocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

func buildRequestedIPs(svc *corev1.Service, ann annotations.Spec, caps providers.Capabilities, spec *field.Path, errs field.ErrorList) ([]netip.Addr, field.ErrorList) {
	var ips []netip.Addr
	if s := svc.Spec.LoadBalancerIP; s != "" {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			errs = append(errs, field.Invalid(spec.Child("loadBalancerIP"), s, "must be an IP address"))
		} else {
			ips = append(ips, ip)
		}
		if len(ann.RequestedIPs) > 0 && !(len(ann.RequestedIPs) == 1 && ann.RequestedIPs[0] == ip) {
			errs = append(errs, field.Invalid(spec.Child("loadBalancerIP"), s, "conflicts with the loadBalancerIPs annotation; set only one"))
		}
	} else {
		ips = ann.RequestedIPs
	}
	if len(ips) > 0 && !caps.RequestedIPs {
		errs = append(errs, field.Forbidden(spec.Child("loadBalancerIP"), "this load balancer cannot be given a specific address"))
	}
	return ips, errs
}

func buildFamilies(svc *corev1.Service, caps providers.Capabilities, spec *field.Path, errs field.ErrorList) ([]providers.IPFamily, field.ErrorList) {
	var fams []providers.IPFamily
	for i, f := range svc.Spec.IPFamilies {
		fam := providers.IPFamily(f)
		if caps.IPFamilies != nil && !slices.Contains(caps.IPFamilies, fam) {
			errs = append(errs, field.NotSupported(spec.Child("ipFamilies").Index(i), f, familyNames(caps.IPFamilies)))
		}
		fams = append(fams, fam)
	}
	if len(fams) == 0 {
		fams = []providers.IPFamily{providers.IPv4}
	}
	return fams, errs
}

func familyNames(fs []providers.IPFamily) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}
