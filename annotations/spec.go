package annotations

import (
	"net/netip"
)

// Spec is the typed result of parsing a Service's provider-neutral annotations. Zero values mean
// "not set". A provider's own keys are not here: each provider parses them into its own options
// type (aws.Options, baremetal.Options) with ParseSection.
type Spec struct {
	// Internal asks for a load balancer reachable only from inside the network
	// (portico-lb.io/internal, or the AWS keys service.beta.kubernetes.io/aws-load-balancer-internal
	// and -scheme).
	Internal bool
	// SourceRanges from service.beta.kubernetes.io/load-balancer-source-ranges.
	// spec.loadBalancerSourceRanges wins over it; the controller applies that precedence.
	SourceRanges []netip.Prefix
	// RequestedIPs from portico-lb.io/loadBalancerIPs or the MetalLB / kube-vip equivalents.
	RequestedIPs []netip.Addr
}
