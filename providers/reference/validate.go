package reference

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/portico-lb/portico/providers"
)

// validate checks lb against the provider's Capabilities and returns every problem as an
// *providers.InvalidError naming the Service field (several are joined with errors.Join, so
// errors.As still finds the first). It reads only immutable provider state.
func (p *Provider) validate(lb *providers.LoadBalancer) error {
	v := validator{p: p, lb: lb}
	v.families()
	v.ports()
	v.affinity()
	v.requestedIPs()
	v.sourceRanges()
	v.healthCheck()
	switch len(v.errs) {
	case 0:
		return nil
	case 1:
		return v.errs[0]
	default:
		return errors.Join(v.errs...)
	}
}

type validator struct {
	p    *Provider
	lb   *providers.LoadBalancer
	errs []error
}

func (v *validator) invalid(field, format string, args ...any) {
	v.errs = append(v.errs, providers.Invalid(field, format, args...))
}

func (v *validator) families() {
	if len(v.lb.IPFamilies) == 0 {
		v.invalid("spec.ipFamilies", "at least one IP family is required")
	}
	for i, f := range v.lb.IPFamilies {
		field := fmt.Sprintf("spec.ipFamilies[%d]", i)
		switch {
		case f != providers.IPv4 && f != providers.IPv6:
			v.invalid(field, "unknown IP family %q", f)
		case slices.Contains(v.lb.IPFamilies[:i], f):
			v.invalid(field, "duplicate IP family %s", f)
		case !slices.Contains(v.p.caps.IPFamilies, f):
			v.invalid(field, "provider %q does not serve %s (it serves %v)", v.p.name, f, v.p.caps.IPFamilies)
		}
	}
}

func (v *validator) ports() {
	caps := v.p.caps
	if len(v.lb.Ports) == 0 {
		v.invalid("spec.ports", "at least one port is required")
	}
	reportedNodePort, reportedMixed := false, false
	for i, port := range v.lb.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		switch {
		case port.Protocol != providers.TCP && port.Protocol != providers.UDP && port.Protocol != providers.SCTP:
			v.invalid(field+".protocol", "unknown protocol %q", port.Protocol)
		case caps.Protocols != nil && !slices.Contains(caps.Protocols, port.Protocol):
			v.invalid(field+".protocol", "provider %q does not support %s (it supports %v)", v.p.name, port.Protocol, caps.Protocols)
		case !caps.MixedProtocols && port.Protocol != v.lb.Ports[0].Protocol && !reportedMixed:
			reportedMixed = true
			v.invalid(field+".protocol", "provider %q cannot mix protocols on one load balancer (%s and %s)",
				v.p.name, v.lb.Ports[0].Protocol, port.Protocol)
		}
		if port.Port < 1 || port.Port > 65535 {
			v.invalid(field+".port", "port %d is outside 1-65535", port.Port)
		}
		if port.NodePort < 0 || port.NodePort > 65535 {
			v.invalid(field+".nodePort", "node port %d is outside 0-65535", port.NodePort)
		}
		if port.NodePort == 0 && caps.NeedsNodePorts && !reportedNodePort {
			// Every port lacks one when allocateLoadBalancerNodePorts=false; say it once, where
			// the user can fix it.
			reportedNodePort = true
			v.invalid("spec.allocateLoadBalancerNodePorts",
				"port %d/%s has no node port but provider %q forwards traffic to node ports; leave allocateLoadBalancerNodePorts unset or true",
				port.Port, port.Protocol, v.p.name)
		}
		if slices.ContainsFunc(v.lb.Ports[:i], func(q providers.Port) bool {
			return q.Port == port.Port && q.Protocol == port.Protocol
		}) {
			v.invalid(field, "duplicate port %d/%s", port.Port, port.Protocol)
		}
	}
}

func (v *validator) affinity() {
	a := v.lb.SessionAffinity
	if !a.ClientIP {
		return
	}
	if !v.p.caps.SessionAffinity {
		v.invalid("spec.sessionAffinity", "ClientIP is not supported by provider %q", v.p.name)
	}
	if a.Timeout < 0 {
		v.invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "timeout %s is negative", a.Timeout)
	}
}

func (v *validator) requestedIPs() {
	const field = "spec.loadBalancerIP"
	if len(v.lb.RequestedIPs) == 0 {
		return
	}
	if !v.p.caps.RequestedIPs {
		v.invalid(field, "provider %q cannot honour a requested address", v.p.name)
		return
	}
	for i, a := range v.lb.RequestedIPs {
		if !a.IsValid() {
			v.invalid(field, "requested address %d is not a valid IP", i)
			continue
		}
		fam := familyOf(a)
		switch pl := v.p.pools[fam]; {
		case !slices.Contains(v.lb.IPFamilies, fam):
			v.invalid(field, "requested address %s is %s but the Service's IP families are %v", a, fam, v.lb.IPFamilies)
		case slices.ContainsFunc(v.lb.RequestedIPs[:i], func(b netip.Addr) bool { return b.IsValid() && familyOf(b) == fam }):
			v.invalid(field, "more than one %s address requested", fam)
		case pl == nil || !pl.contains(a.Unmap()):
			v.invalid(field, "requested address %s is outside the provider's pools", a)
		}
	}
}

func (v *validator) sourceRanges() {
	for i, r := range v.lb.SourceRanges {
		if !r.IsValid() {
			v.invalid(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), "not a valid CIDR")
		}
	}
}

func (v *validator) healthCheck() {
	hc := v.lb.HealthCheckNodePort
	switch {
	case hc < 0 || hc > 65535:
		v.invalid("spec.healthCheckNodePort", "node port %d is outside 0-65535", hc)
	case hc == 0 && v.lb.LocalTrafficOnly && v.p.caps.NeedsNodePorts:
		v.invalid("spec.healthCheckNodePort",
			"externalTrafficPolicy=Local needs a health check node port with provider %q", v.p.name)
	}
}
