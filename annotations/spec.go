package annotations

import (
	"net/netip"
	"time"
)

// Spec is the typed result of parsing a Service's annotations. Zero values mean "not set"
// unless a field says otherwise; pointers distinguish "not set" from an explicit false/zero.
type Spec struct {
	// Internal asks for a load balancer reachable only from inside the network
	// (portico-lb.io/internal, or the AWS key service.beta.kubernetes.io/aws-load-balancer-internal).
	Internal bool
	// SourceRanges from service.beta.kubernetes.io/load-balancer-source-ranges.
	// spec.loadBalancerSourceRanges wins over it; the controller applies that precedence.
	SourceRanges []netip.Prefix
	// RequestedIPs from portico-lb.io/loadBalancerIPs or the MetalLB / kube-vip equivalents.
	RequestedIPs []netip.Addr

	AWS       AWS
	BareMetal BareMetal
}

// AWSType is the kind of AWS load balancer.
type AWSType string

// AWS load balancer kinds.
const (
	AWSClassic AWSType = "classic" // default when the type annotation is absent
	AWSNLB     AWSType = "nlb"
)

// AWS holds the service.beta.kubernetes.io/aws-load-balancer-* settings.
type AWS struct {
	// Type is AWSClassic when the type annotation is absent.
	Type                  AWSType
	CrossZone             *bool
	AdditionalTags        map[string]string
	Subnets               []string
	TargetNodeLabels      map[string]string
	ConnectionIdleTimeout *time.Duration
	ProxyProtocol         bool
	SSLCert               string
	// SSLPorts lists port numbers and names, or is ["*"]; nil means the default, "*".
	SSLPorts []string
	// SSLNegotiationPolicy names a predefined TLS policy; "" means the default.
	SSLNegotiationPolicy string
	// ConnectionDraining and ConnectionDrainingTimeout are Classic ELB attributes.
	ConnectionDraining        *bool
	ConnectionDrainingTimeout *time.Duration
	// SecurityGroups replace the Classic ELB's own group; ExtraSecurityGroups are added.
	SecurityGroups      []string
	ExtraSecurityGroups []string
	// BackendProtocol is lower case: http, https, ssl or tcp.
	BackendProtocol string
	HealthCheck     AWSHealthCheck
}

// AWSHealthCheck overrides the default target health check.
type AWSHealthCheck struct {
	Protocol           string // TCP, HTTP, HTTPS
	Port               string // "traffic-port" or a number
	Path               string
	HealthyThreshold   *int32
	UnhealthyThreshold *int32
	Timeout            *time.Duration
	Interval           *time.Duration
}

// BareMetal holds the VIP-pool settings (MetalLB-compatible keys).
type BareMetal struct {
	// AddressPool names the pool to allocate from.
	AddressPool string
	// AllowSharedIP is the sharing key: Services with the same key may share a VIP.
	AllowSharedIP string
}
