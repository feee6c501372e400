package aws

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// The NLB part of desired: listeners and target groups, health checks, addresses, and the
// warnings for keys that apply to Classic ELBs only.

// nlbDesired builds one listener and target group per port number: TCP_UDP when the number
// carries both protocols, TLS when the certificate applies to it.
func nlbDesired(name string, lb *providers.LoadBalancer, spec ServiceOptions) (nlbSpec, error) {
	byPort := map[int32][]providers.Port{}
	var order []int32
	for _, pt := range lb.Ports {
		if _, ok := byPort[pt.Port]; !ok {
			order = append(order, pt.Port)
		}
		byPort[pt.Port] = append(byPort[pt.Port], pt)
	}
	slices.Sort(order)
	out := nlbSpec{IPAddressType: "ipv4", Attributes: nlbAttributes(spec)}
	if spec.IPAddressType != "" {
		out.IPAddressType = spec.IPAddressType
	}
	for _, port := range order {
		pts := byPort[port]
		l := nlbListener{Port: port}
		nodePort := pts[0].NodePort
		switch {
		case len(pts) == 1 && pts[0].Protocol == providers.UDP:
			l.Protocol = "UDP"
		case len(pts) == 1:
			l.Protocol = "TCP"
		default:
			for _, pt := range pts[1:] {
				if pt.NodePort != nodePort {
					return nlbSpec{}, providers.Invalid("spec.ports", "port %d serves TCP and UDP on different node ports (%d, %d); an NLB TCP_UDP listener forwards both to one node port", port, nodePort, pt.NodePort)
				}
			}
			l.Protocol = "TCP_UDP"
		}
		tgProtocol := l.Protocol
		if l.Protocol == "TCP" && sslPort(spec, pts[0]) {
			l.Protocol, l.CertARN, l.SSLPolicy, l.ALPN = "TLS", spec.SSLCert, defaultTLSPolicy, spec.ALPNPolicy
			if spec.SSLNegotiationPolicy != "" {
				l.SSLPolicy = spec.SSLNegotiationPolicy
			}
			if spec.BackendProtocol == "ssl" {
				tgProtocol = "TLS"
			}
		}
		hc := nlbHealthCheck(lb, spec.HealthCheck)
		l.TG = targetGroupSpec{
			// A target group's health-check protocol is not reliably changeable in place
			// (kubernetes/kubernetes#80996): it is part of the name, so a change makes a new group.
			Name:       targetGroupName(name, tgProtocol+"/"+hc.Protocol, nodePort, port),
			Protocol:   tgProtocol,
			Port:       nodePort,
			HC:         hc,
			Attributes: tgAttributes(tgProtocol, spec.TargetGroupAttributes),
		}
		out.Listeners = append(out.Listeners, l)
	}
	return out, nil
}

// nlbDefaultAttributes are the NLB attributes the provider manages, at the values
// cloud-provider-aws (and AWS) default to; the Service's annotations override them.
var nlbDefaultAttributes = map[string]string{
	"load_balancing.cross_zone.enabled": "false",
	"access_logs.s3.enabled":            "false",
}

// tgDefaultAttributes are AWS's defaults for the target-group attributes the Service may set
// (instance targets): a key removed from the annotation returns to its default, on the target
// groups whose protocol takes it (tgAttributeProtocols).
// cloud-provider-aws leaves a removed key at its last value.
var tgDefaultAttributes = map[string]string{
	"proxy_protocol_v2.enabled":                           "false",
	"preserve_client_ip.enabled":                          "true",
	"deregistration_delay.timeout_seconds":                "300",
	"deregistration_delay.connection_termination.enabled": "false",
	"stickiness.enabled":                                  "false",
	"stickiness.type":                                     "source_ip",
}

// tgAttributeProtocols names, for each target-group attribute the provider manages, the
// target-group protocols AWS accepts it on (instance targets; AWS's Network Load Balancer guide,
// "Edit target group attributes"): sticky sessions are not supported on TLS target groups, and
// client IP preservation is always on, and cannot be changed, for UDP and TCP_UDP ones. An
// attribute is written only to the target groups whose protocol takes it: writing stickiness to
// a TLS target group fails the whole Ensure (InvalidConfigurationRequest).
var tgAttributeProtocols = map[string][]string{
	"proxy_protocol_v2.enabled":                           {"TCP", "UDP", "TCP_UDP", "TLS"},
	"preserve_client_ip.enabled":                          {"TCP", "TLS"},
	"deregistration_delay.timeout_seconds":                {"TCP", "UDP", "TCP_UDP", "TLS"},
	"deregistration_delay.connection_termination.enabled": {"TCP", "UDP", "TCP_UDP", "TLS"},
	"stickiness.enabled":                                  {"TCP", "UDP", "TCP_UDP"},
	"stickiness.type":                                     {"TCP", "UDP", "TCP_UDP"},
}

// tgAttributeApplies reports whether a target group of protocol takes the attribute key.
func tgAttributeApplies(key, protocol string) bool {
	return slices.Contains(tgAttributeProtocols[key], protocol)
}

// tgAttributes are the attributes a target group of protocol is converged to: the Service's
// values over tgDefaultAttributes, only those its protocol takes.
func tgAttributes(protocol string, set map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tgDefaultAttributes {
		if tgAttributeApplies(k, protocol) {
			out[k] = v
		}
	}
	for k, v := range set {
		if tgAttributeApplies(k, protocol) {
			out[k] = v
		}
	}
	return out
}

// tgAttributeWarnings name the target-group attributes the Service sets that a target group of
// its NLB does not take (they are not written to it), one per attribute and protocol.
func tgAttributeWarnings(n nlbSpec, set map[string]string) []string {
	var w []string
	seen := map[string]bool{}
	for _, l := range n.Listeners {
		for _, k := range sortedKeys(set) {
			if tgAttributeApplies(k, l.TG.Protocol) || seen[k+"/"+l.TG.Protocol] {
				continue
			}
			seen[k+"/"+l.TG.Protocol] = true
			w = append(w, fmt.Sprintf("%s: %s does not apply to %s target groups (AWS accepts it on %s); it is not set on them",
				annotations.AWSTargetGroupAttributes, k, l.TG.Protocol, strings.Join(tgAttributeProtocols[k], ", ")))
		}
	}
	return w
}

// nlbAttributes are the NLB's managed attributes for spec. The bucket and prefix are set only
// with logs on: AWS refuses an empty bucket, and turning logs off leaves them unchanged.
func nlbAttributes(spec ServiceOptions) map[string]string {
	out := maps.Clone(nlbDefaultAttributes)
	if spec.CrossZone != nil {
		out["load_balancing.cross_zone.enabled"] = strconv.FormatBool(*spec.CrossZone)
	}
	if al := spec.AccessLog; al.Enabled != nil && *al.Enabled {
		out["access_logs.s3.enabled"] = "true"
		out["access_logs.s3.bucket"] = al.Bucket
		out["access_logs.s3.prefix"] = al.Prefix
	}
	return out
}

// nlbHealthCheck: HTTP /healthz on the health-check node port for externalTrafficPolicy: Local,
// TCP on the traffic port otherwise, each annotation overriding its part.
func nlbHealthCheck(lb *providers.LoadBalancer, o HealthCheckOptions) healthCheck {
	hc := healthCheck{Protocol: "TCP", Port: trafficPort, Interval: 30, Timeout: 10, Healthy: 3, Unhealthy: 3}
	if lb.LocalTrafficOnly && lb.HealthCheckNodePort != 0 {
		hc = healthCheck{Protocol: "HTTP", Port: itoa(lb.HealthCheckNodePort), Path: healthzPath, Interval: 10, Timeout: 6, Healthy: 2, Unhealthy: 2}
	}
	if o.Protocol != "" {
		hc.Protocol = strings.ToUpper(o.Protocol)
	}
	if o.Port != "" {
		hc.Port = o.Port
	}
	if o.Path != "" {
		hc.Path = o.Path
	}
	if hc.Protocol == "TCP" {
		hc.Path = ""
	} else if hc.Path == "" {
		hc.Path = healthzPath
	}
	setInt32(&hc.Healthy, o.HealthyThreshold)
	setInt32(&hc.Unhealthy, o.UnhealthyThreshold)
	setSeconds(&hc.Timeout, o.Timeout)
	setSeconds(&hc.Interval, o.Interval)
	return hc
}

// nlbAddresses takes the EIP or private-address annotation: EIPs for an internet-facing NLB,
// private addresses for an internal one, never both. Their count is checked against the
// subnets when the NLB is created.
func nlbAddresses(n *nlbSpec, spec ServiceOptions, scheme string) error {
	switch {
	case len(spec.EIPAllocations) > 0 && len(spec.PrivateIPv4Addresses) > 0:
		return providers.Invalid("metadata.annotations["+annotations.AWSEIPAllocations+"]", "set %s (internet-facing) or %s (internal), not both", annotations.AWSEIPAllocations, annotations.AWSPrivateIPv4Addresses)
	case len(spec.EIPAllocations) > 0 && scheme != schemeInternetFacing:
		return providers.Invalid("metadata.annotations["+annotations.AWSEIPAllocations+"]", "Elastic IPs apply to internet-facing NLBs; this one is internal (use %s)", annotations.AWSPrivateIPv4Addresses)
	case len(spec.PrivateIPv4Addresses) > 0 && scheme != schemeInternal:
		return providers.Invalid("metadata.annotations["+annotations.AWSPrivateIPv4Addresses+"]", "private addresses apply to internal NLBs; this one is internet-facing (use %s)", annotations.AWSEIPAllocations)
	}
	n.EIPAllocations = slices.Clone(spec.EIPAllocations)
	for _, a := range spec.PrivateIPv4Addresses {
		n.PrivateIPv4s = append(n.PrivateIPv4s, a.String())
	}
	return nil
}

// nlbWarnings name the keys set on the Service that apply to Classic ELBs only, one each.
func nlbWarnings(spec ServiceOptions) []string {
	var w []string
	for _, k := range []struct {
		set bool
		key string
	}{
		{spec.ProxyProtocol, annotations.AWSProxyProtocol},
		{spec.ConnectionIdleTimeout != nil, annotations.AWSConnectionIdleTimeout},
		{spec.ConnectionDraining != nil, annotations.AWSConnectionDrainingEnabled},
		{spec.ConnectionDrainingTimeout != nil, annotations.AWSConnectionDrainingTimeout},
		{len(spec.SecurityGroups) > 0, annotations.AWSSecurityGroups},
		{len(spec.ExtraSecurityGroups) > 0, annotations.AWSExtraSecurityGroups},
		{spec.AccessLog.EmitInterval != nil, annotations.AWSAccessLogEmitInterval},
	} {
		if k.set {
			w = append(w, notForKind(k.key, "nlb"))
		}
	}
	if spec.BackendProtocol == "http" || spec.BackendProtocol == "https" {
		w = append(w, fmt.Sprintf("%s=%s does not apply to an NLB, which forwards TCP; it is ignored", annotations.AWSBackendProtocol, spec.BackendProtocol))
	}
	return w
}
