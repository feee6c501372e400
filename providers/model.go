package providers

import (
	"fmt"
	"net/netip"
	"time"
)

// Ref identifies the load balancer of one Service. Providers use it to name and tag what they
// create; UID keeps two Services that reuse a name apart.
type Ref struct {
	Namespace string
	Name      string
	UID       string
}

// String returns namespace/name.
func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Protocol is a transport protocol of a port.
type Protocol string

// Protocols a Service port may use.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// IPFamily of an address.
type IPFamily string

// The IP families.
const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// Port is one frontend port of the load balancer. A Service port that serves both TCP and UDP on
// the same number appears as two Ports.
type Port struct {
	Name     string
	Protocol Protocol
	Port     int32
	// NodePort is the node port traffic is forwarded to; 0 when the Service does not allocate
	// node ports (allocateLoadBalancerNodePorts=false).
	NodePort int32
}

// Node is a backend node the load balancer may send traffic to.
type Node struct {
	Name       string
	ProviderID string
	// Addresses are the node's InternalIP addresses (ExternalIP when it has none).
	Addresses []netip.Addr
	Labels    map[string]string
}

// SessionAffinity is the Service's affinity as the provider must express it.
type SessionAffinity struct {
	ClientIP bool
	Timeout  time.Duration
}

// LoadBalancer is the complete desired state of one Service's load balancer, built by the
// controller from the Service, its annotations and the eligible nodes. Providers receive the
// whole thing on every call and converge to it.
type LoadBalancer struct {
	Ref Ref
	// Class is the Service's loadBalancerClass ("" for none).
	Class    string
	Internal bool
	// IPFamilies in the order of spec.ipFamilies.
	IPFamilies []IPFamily
	// IPFamilyPolicy is spec.ipFamilyPolicy; "" means SingleStack.
	IPFamilyPolicy IPFamilyPolicy
	// RequestedIPs from spec.loadBalancerIP or a provider annotation; empty lets the provider choose.
	RequestedIPs []netip.Addr
	// CurrentIPs are the IPs status.loadBalancer.ingress reports now: the record of what the
	// Service holds, so that a provider allocating addresses keeps them across restarts. It is
	// observed, not desired, state: left out of the JSON form (the controller's model hash), so
	// that writing the status Ensure returned does not cause another Ensure.
	CurrentIPs []netip.Addr `json:"-"`
	// CurrentHostnames are the hostnames status.loadBalancer.ingress reports now (observed, left
	// out of the JSON form like CurrentIPs): a provider replacing a load balancer deletes the old
	// one only once the Service's status names the new one.
	CurrentHostnames []string `json:"-"`
	Ports            []Port
	// SourceRanges allowed to reach the load balancer; empty means everyone.
	SourceRanges []netip.Prefix
	// LocalTrafficOnly is externalTrafficPolicy=Local: only nodes with a ready local endpoint,
	// as told by HealthCheckNodePort, should receive traffic.
	LocalTrafficOnly    bool
	HealthCheckNodePort int32
	SessionAffinity     SessionAffinity
	// Nodes eligible as backends, sorted by name.
	Nodes []Node
	// Options are the provider's own settings for this Service, parsed from its annotations by
	// the provider's ParseOptions (aws.ServiceOptions, baremetal.ServiceOptions); nil when it has
	// none. The provider-neutral settings (Internal, SourceRanges, RequestedIPs) are the fields
	// above, already resolved.
	Options ServiceOptions
	// Labels are the Service's labels and Selector its spec.selector, for providers that pick
	// address pools by label or share one address between Services with the same backends.
	Labels, Selector map[string]string
}

// ServiceOptions are one provider's own typed settings for one Service's load balancer. Each
// provider defines its type and parses it from the annotation keys that are its own (declared and
// documented in package annotations) in ParseOptions; the controller calls ParseOptions of the
// provider the Service is handed to, reports its problems with the rest of the Service's, and
// hands the result back in LoadBalancer.Options. A provider reads only its own type. The value
// is part of the model's JSON form (the controller's model hash), so it must marshal
// deterministically: plain data, no functions or channels.
type ServiceOptions any

// OptionsOf returns lb's options as provider's type T (given as a value or a pointer): the zero
// value when none were given, an error when they belong to another provider.
func OptionsOf[T any](lb *LoadBalancer, provider string) (T, error) {
	var zero T
	switch o := lb.Options.(type) {
	case nil:
		return zero, nil
	case T:
		return o, nil
	case *T:
		return *o, nil
	}
	return zero, fmt.Errorf("load balancer %s carries options of type %T, not the %s provider's", lb.Ref, lb.Options, provider)
}

// IPFamilyPolicy is a Service's spec.ipFamilyPolicy.
type IPFamilyPolicy string

// IP family policies.
const (
	SingleStack      IPFamilyPolicy = "SingleStack"
	PreferDualStack  IPFamilyPolicy = "PreferDualStack"
	RequireDualStack IPFamilyPolicy = "RequireDualStack"
)

// IPMode says how traffic to an ingress IP reaches nodes (status.loadBalancer.ingress[].ipMode).
type IPMode string

// IP modes.
const (
	// IPModeVIP: packets arrive with the LB IP as destination (bare-metal VIPs).
	IPModeVIP IPMode = "VIP"
	// IPModeProxy: packets arrive at a node port from a proxy (cloud load balancers).
	IPModeProxy IPMode = "Proxy"
)

// PortStatus reports a port the load balancer cannot serve.
type PortStatus struct {
	Port     int32
	Protocol Protocol
	// Error is a CamelCase reason, e.g. "PortAllocationFailed".
	Error string
}

// Ingress is one address the load balancer is reachable at.
type Ingress struct {
	IP       netip.Addr
	Hostname string
	IPMode   IPMode
	Ports    []PortStatus
}

// Status is what a provider observed after converging.
type Status struct {
	Ingress []Ingress
	// Warnings describe settings the provider ignored (e.g. an annotation that does not apply to
	// the chosen kind of load balancer). The controller reports each as a Warning Event; they
	// never fail the call.
	Warnings []string
	// ReplacementPending says Ingress names a new load balancer that replaces one the Service's
	// status still names; the provider deletes the old one on an Ensure whose CurrentIPs or
	// CurrentHostnames name the new one. The caller writes the status and calls Ensure again.
	ReplacementPending bool
}

// Capabilities tell the controller what a provider can express, so that unsupported requests
// are rejected as invalid input before any provider call.
type Capabilities struct {
	// NeedsNodePorts: the provider forwards to node ports and cannot serve a port without one.
	NeedsNodePorts bool
	// SessionAffinity: the provider can honour sessionAffinity=ClientIP.
	SessionAffinity bool
	// MixedProtocols: TCP and UDP (and SCTP) ports on one load balancer.
	MixedProtocols bool
	// Protocols the provider serves; nil means all.
	Protocols []Protocol
	// RequestedIPs: the provider can honour a requested address.
	RequestedIPs bool
	// IPFamilies the provider can serve; nil means all.
	IPFamilies []IPFamily
}
