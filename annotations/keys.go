package annotations

import "slices"

// Key prefixes. Only keys under porticoPrefix are checked for typos; every other prefix belongs to
// someone else and keys Portico does not read under it are ignored.
const (
	porticoPrefix = "portico-lb.io/"
	awsPrefix     = "service.beta.kubernetes.io/"
)

// Values of Key.Provider.
const (
	providerAny       = "any"
	providerAWS       = "aws"
	providerBareMetal = "baremetal"
)

// Provider-neutral keys.
const (
	// Internal asks for a load balancer reachable only from inside the network (VPC or site).
	// Values: "true" or "false", nothing else. Default: "false". Must agree with
	// AWSLoadBalancerInternal when both are set.
	Internal = porticoPrefix + "internal"

	// SourceRanges limits the client addresses allowed to reach the load balancer.
	// Values: a comma-separated list of IPv4 or IPv6 CIDRs ("10.0.0.0/8, 2001:db8::/32"); a bare
	// IP is an error. Default: everyone. spec.loadBalancerSourceRanges wins over it.
	SourceRanges = awsPrefix + "load-balancer-source-ranges"

	// LoadBalancerIPs requests specific load balancer IPs (one per family for dual stack).
	// Values: a comma-separated list of IPv4 or IPv6 addresses. Default: the provider chooses.
	// Aliases: MetalLBLoadBalancerIPs, MetalLBLegacyLoadBalancerIPs, KubeVIPLoadBalancerIPs; when
	// several are set they must list the same addresses in the same order.
	LoadBalancerIPs = porticoPrefix + "loadBalancerIPs"
	// MetalLBLoadBalancerIPs is MetalLB's spelling of LoadBalancerIPs (alias).
	MetalLBLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	// MetalLBLegacyLoadBalancerIPs is MetalLB's pre-0.14 spelling of LoadBalancerIPs (alias).
	MetalLBLegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	// KubeVIPLoadBalancerIPs is kube-vip's spelling of LoadBalancerIPs (alias; note the lower-case b).
	KubeVIPLoadBalancerIPs = "kube-vip.io/loadbalancerIPs"
)

// Key describes one annotation key Portico reads.
type Key struct {
	// Name is the canonical key.
	Name string
	// Aliases are other projects' keys read with the same meaning. When several of Name and
	// Aliases are set they must agree; the first valid one in that order is used.
	Aliases []string
	// Provider is "any", "aws" or "baremetal".
	Provider string
	// Values says what is accepted.
	Values string
	// Default says what happens when the key is absent.
	Default string
	// Doc says what the key does.
	Doc string
}

// Keys is the registry of every annotation key Portico reads: Parse reads the common ones,
// each provider's ParseOptions its own (with ParseSection, which accepts only keys listed here),
// and docs/annotations.md is generated from it, so the keys, their documentation and the readers
// cannot drift apart.
var Keys = slices.Concat(commonKeys, awsKeys, bareMetalKeys)

// commonKeys are the provider-neutral keys, read by Parse.
var commonKeys = []Key{
	{
		Name: Internal, Provider: providerAny,
		Values:  "`true` or `false`",
		Default: "`false`",
		Doc:     "Load balancer reachable only from inside the network (VPC or site). Must agree with `" + AWSLoadBalancerInternal + "` when both are set.",
	},
	{
		Name: SourceRanges, Provider: providerAny,
		Values:  "comma-separated IPv4/IPv6 CIDRs, e.g. `10.0.0.0/8, 2001:db8::/32` (a bare IP is an error)",
		Default: "everyone",
		Doc:     "Client ranges allowed to reach the load balancer. `spec.loadBalancerSourceRanges` wins over it.",
	},
	{
		Name:     LoadBalancerIPs,
		Aliases:  []string{MetalLBLoadBalancerIPs, MetalLBLegacyLoadBalancerIPs, KubeVIPLoadBalancerIPs},
		Provider: providerAny,
		Values:   "comma-separated IPv4/IPv6 addresses, e.g. `198.18.128.10, 2001:db8::10`",
		Default:  "the provider chooses",
		Doc:      "Load balancer IPs to use (one per family for dual stack). The key and its aliases must list the same addresses in the same order.",
	},
}
