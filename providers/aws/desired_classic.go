package aws

import (
	"slices"
	"strings"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// The Classic ELB part of desired: listeners, the health check, attributes, and the warnings
// for keys that apply to NLBs only.

// classicDesired builds a Classic ELB: one listener per port, the backend protocol and TLS as
// cloud-provider-aws does, one health check.
func classicDesired(lb *providers.LoadBalancer, spec ServiceOptions, defaultSGs []string) classicSpec {
	backend := spec.BackendProtocol
	if backend == "" {
		backend = "tcp"
	}
	out := classicSpec{
		ProxyProtocol:  spec.ProxyProtocol,
		SecurityGroups: slices.Clone(defaultSGs),
		SSLPolicy:      spec.SSLNegotiationPolicy,

		ExtraSecurityGroups: slices.Clone(spec.ExtraSecurityGroups),

		IdleTimeout:     classicDefaultIdleTimeout,
		DrainingTimeout: classicDefaultDrainingTimeout,
		AccessLog:       classicAccessLog{EmitInterval: classicDefaultEmitInterval},
	}
	if len(spec.SecurityGroups) > 0 {
		out.SecurityGroups = slices.Clone(spec.SecurityGroups)
	}
	if spec.CrossZone != nil {
		out.CrossZone = *spec.CrossZone
	}
	if spec.ConnectionDraining != nil {
		out.Draining = *spec.ConnectionDraining
	}
	setSeconds(&out.DrainingTimeout, spec.ConnectionDrainingTimeout)
	setSeconds(&out.IdleTimeout, spec.ConnectionIdleTimeout)
	if al := spec.AccessLog; al.Enabled != nil && *al.Enabled {
		out.AccessLog = classicAccessLog{Enabled: true, EmitInterval: classicDefaultEmitInterval, Bucket: al.Bucket, Prefix: al.Prefix}
		setInt32(&out.AccessLog.EmitInterval, al.EmitInterval)
	}
	ports := slices.Clone(lb.Ports)
	slices.SortFunc(ports, func(a, b providers.Port) int { return int(a.Port - b.Port) })
	for _, pt := range ports {
		l := classicListener{Port: pt.Port, InstancePort: pt.NodePort, InstanceProtocol: strings.ToUpper(backend)}
		tls := sslPort(spec, pt)
		switch backend {
		case "http", "https":
			l.Protocol = "HTTP"
			if tls {
				l.Protocol = "HTTPS"
			}
		default: // tcp, ssl
			l.Protocol = "TCP"
			if tls {
				l.Protocol = "SSL"
			}
		}
		if tls {
			l.CertARN = spec.SSLCert
		}
		out.Listeners = append(out.Listeners, l)
	}
	out.HealthCheck = classicHealth(lb, spec.HealthCheck, out.Listeners[0])
	return out
}

// classicHealth: TCP (SSL for an ssl/https backend) on the first listener's node port, HTTP
// /healthz on the health-check node port for externalTrafficPolicy: Local; 10/5/2/6 as
// cloud-provider-aws; each annotation overriding its part.
func classicHealth(lb *providers.LoadBalancer, o HealthCheckOptions, first classicListener) classicHealthCheck {
	proto, port, path := "TCP", itoa(first.InstancePort), ""
	if first.InstanceProtocol == "SSL" || first.InstanceProtocol == "HTTPS" {
		proto = "SSL"
	}
	if lb.LocalTrafficOnly && lb.HealthCheckNodePort != 0 {
		proto, port, path = "HTTP", itoa(lb.HealthCheckNodePort), healthzPath
	}
	if o.Protocol != "" {
		proto = strings.ToUpper(o.Protocol)
	}
	if o.Port == trafficPort {
		port = itoa(first.InstancePort)
	} else if o.Port != "" {
		port = o.Port
	}
	if o.Path != "" {
		path = o.Path
	}
	target := proto + ":" + port
	if proto == "HTTP" || proto == "HTTPS" {
		if path == "" {
			path = healthzPath
		}
		target += path
	}
	hc := classicHealthCheck{Target: target, Interval: 10, Timeout: 5, Healthy: 2, Unhealthy: 6}
	setInt32(&hc.Healthy, o.HealthyThreshold)
	setInt32(&hc.Unhealthy, o.UnhealthyThreshold)
	setSeconds(&hc.Timeout, o.Timeout)
	setSeconds(&hc.Interval, o.Interval)
	return hc
}

// classicWarnings name the keys set on the Service that apply to NLBs only, one each.
func classicWarnings(spec ServiceOptions) []string {
	var w []string
	for _, k := range []struct {
		set bool
		key string
	}{
		{len(spec.TargetGroupAttributes) > 0, annotations.AWSTargetGroupAttributes},
		{len(spec.EIPAllocations) > 0, annotations.AWSEIPAllocations},
		{len(spec.PrivateIPv4Addresses) > 0, annotations.AWSPrivateIPv4Addresses},
		{spec.NLBTargetType != "", annotations.AWSNLBTargetType},
		{spec.IPAddressType != "", annotations.AWSIPAddressType},
		{spec.ALPNPolicy != "", annotations.AWSALPNPolicy},
	} {
		if k.set {
			w = append(w, notForKind(k.key, "classic"))
		}
	}
	return w
}
