package annotations

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

// AWS keys, under service.beta.kubernetes.io/ as in cloud-provider-aws.
const (
	// AWSLoadBalancerInternal is cloud-provider-aws's internal switch, read with its semantics:
	// any non-empty value other than "false" means internal ("true", "yes", "0.0.0.0/0" and even
	// "False" all do); "false" or an empty value means internet-facing. Default: internet-facing.
	// Must agree with Internal when both are set.
	AWSLoadBalancerInternal = awsPrefix + "aws-load-balancer-internal"

	// AWSLoadBalancerScheme is the scheme of the load balancer, as the AWS Load Balancer
	// Controller spells it. Values: "internal" or "internet-facing". Default: internet-facing.
	// Must agree with Internal and AWSLoadBalancerInternal when they are set. A change replaces
	// the load balancer (AWS cannot change a scheme in place).
	AWSLoadBalancerScheme = awsPrefix + "aws-load-balancer-scheme"

	// AWSLoadBalancerType selects the kind of AWS load balancer. Values: "nlb". Default (absent):
	// Classic ELB. "external" and "nlb-ip" belong to the AWS Load Balancer Controller and are
	// reported as errors; so is anything else.
	AWSLoadBalancerType = awsPrefix + "aws-load-balancer-type"

	// AWSCrossZoneLoadBalancing turns cross-zone load balancing on or off.
	// Values: "true" or "false". Default: the AWS default for the load balancer kind.
	AWSCrossZoneLoadBalancing = awsPrefix + "aws-load-balancer-cross-zone-load-balancing-enabled"

	// AWSAdditionalResourceTags adds tags to the AWS resources Portico creates.
	// Values: "k=v,k2=v2,keyonly"; keys 1-128 characters not starting with "aws:", values up to
	// 256 characters. Default: none.
	AWSAdditionalResourceTags = awsPrefix + "aws-load-balancer-additional-resource-tags"

	// AWSSubnets places the load balancer in these subnets.
	// Values: a comma-separated list of subnet IDs or Name tags. Default: discovered subnets.
	AWSSubnets = awsPrefix + "aws-load-balancer-subnets"

	// AWSTargetNodeLabels restricts backends to nodes carrying these labels.
	// Values: "k=v,k2=v2,k3" (label keys and values; "k3" or "k3=" matches any value). Default:
	// every eligible node.
	AWSTargetNodeLabels = awsPrefix + "aws-load-balancer-target-node-labels"

	// AWSConnectionIdleTimeout is the Classic ELB idle timeout.
	// Values: integer seconds, 1 to 4000. Default: 60 (the AWS default).
	AWSConnectionIdleTimeout = awsPrefix + "aws-load-balancer-connection-idle-timeout"

	// AWSProxyProtocol enables PROXY protocol towards the backends (Classic ELB).
	// Values: "*" only. Default: off.
	AWSProxyProtocol = awsPrefix + "aws-load-balancer-proxy-protocol"

	// AWSSSLCert terminates TLS on the listeners named by AWSSSLPorts with this certificate.
	// Values: an ACM or IAM certificate ARN. Default: no TLS.
	AWSSSLCert = awsPrefix + "aws-load-balancer-ssl-cert"

	// AWSSSLPorts names the listeners that use AWSSSLCert.
	// Values: "*" or a comma-separated list of port numbers and port names. Default: "*".
	AWSSSLPorts = awsPrefix + "aws-load-balancer-ssl-ports"

	// AWSSSLNegotiationPolicy is the predefined TLS policy of the TLS listeners (NLB SslPolicy,
	// Classic ELB Reference-Security-Policy). Values: a policy name such as
	// "ELBSecurityPolicy-TLS13-1-2-2021-06". Default: ELBSecurityPolicy-2016-08 (NLB), the AWS
	// default (Classic).
	AWSSSLNegotiationPolicy = awsPrefix + "aws-load-balancer-ssl-negotiation-policy"

	// AWSConnectionDrainingEnabled turns Classic ELB connection draining on or off.
	// Values: "true" or "false". Default: the AWS default (off).
	AWSConnectionDrainingEnabled = awsPrefix + "aws-load-balancer-connection-draining-enabled"

	// AWSConnectionDrainingTimeout is the Classic ELB connection draining timeout.
	// Values: integer seconds, 1 to 3600. Default: 300 (the AWS default).
	AWSConnectionDrainingTimeout = awsPrefix + "aws-load-balancer-connection-draining-timeout"

	// AWSSecurityGroups replaces the Classic ELB's own security group with these groups.
	// Values: a comma-separated list of security group IDs (sg-...). Default: a group per
	// load balancer, owned by Portico.
	AWSSecurityGroups = awsPrefix + "aws-load-balancer-security-groups"

	// AWSExtraSecurityGroups adds these groups to the Classic ELB's groups.
	// Values: a comma-separated list of security group IDs (sg-...). Default: none.
	AWSExtraSecurityGroups = awsPrefix + "aws-load-balancer-extra-security-groups"

	// AWSBackendProtocol is the protocol between the load balancer and the backends.
	// Values: "http", "https", "ssl", "tcp" (any case). Default: "tcp".
	AWSBackendProtocol = awsPrefix + "aws-load-balancer-backend-protocol"

	// AWSHealthCheckProtocol is the target health-check protocol.
	// Values: "TCP", "HTTP", "HTTPS" (any case). Default: TCP, or HTTP to the health-check node
	// port for externalTrafficPolicy: Local.
	AWSHealthCheckProtocol = awsPrefix + "aws-load-balancer-healthcheck-protocol"

	// AWSHealthCheckPort is the target health-check port.
	// Values: "traffic-port" or a port number 1-65535. Default: "traffic-port", or the
	// health-check node port for externalTrafficPolicy: Local.
	AWSHealthCheckPort = awsPrefix + "aws-load-balancer-healthcheck-port"

	// AWSHealthCheckPath is the HTTP(S) health-check path.
	// Values: a path starting with "/", up to 1024 characters, no whitespace. Default: "/healthz"
	// on the health-check node port; unused for TCP checks.
	AWSHealthCheckPath = awsPrefix + "aws-load-balancer-healthcheck-path"

	// AWSHealthCheckHealthyThreshold is the number of passed checks before a target is healthy.
	// Values: integer 2-10. Default: the provider default for the load balancer kind.
	AWSHealthCheckHealthyThreshold = awsPrefix + "aws-load-balancer-healthcheck-healthy-threshold"

	// AWSHealthCheckUnhealthyThreshold is the number of failed checks before a target is unhealthy.
	// Values: integer 2-10. Default: the provider default for the load balancer kind.
	AWSHealthCheckUnhealthyThreshold = awsPrefix + "aws-load-balancer-healthcheck-unhealthy-threshold"

	// AWSHealthCheckTimeout is the health-check timeout.
	// Values: integer seconds, 2 to 120. Default: the provider default for the load balancer kind.
	AWSHealthCheckTimeout = awsPrefix + "aws-load-balancer-healthcheck-timeout"

	// AWSHealthCheckInterval is the time between health checks.
	// Values: integer seconds, 5 to 300. Default: the provider default for the load balancer kind.
	AWSHealthCheckInterval = awsPrefix + "aws-load-balancer-healthcheck-interval"
)

// Bare-metal keys, with MetalLB's spellings as aliases.
const (
	// AddressPool names the VIP pool to allocate from.
	// Values: a pool name (a DNS-1123 subdomain). Default: any pool that auto-assigns.
	// Aliases: MetalLBAddressPool, MetalLBLegacyAddressPool; when several are set they must agree.
	AddressPool = porticoPrefix + "address-pool"
	// MetalLBAddressPool is MetalLB's spelling of AddressPool (alias).
	MetalLBAddressPool = "metallb.io/address-pool"
	// MetalLBLegacyAddressPool is MetalLB's pre-0.14 spelling of AddressPool (alias).
	MetalLBLegacyAddressPool = "metallb.universe.tf/address-pool"

	// AllowSharedIP is a sharing key: Services carrying the same key may share a VIP.
	// Values: any non-empty string. Default: no sharing.
	// Aliases: MetalLBAllowSharedIP, MetalLBLegacyAllowSharedIP; when several are set they must agree.
	AllowSharedIP = porticoPrefix + "allow-shared-ip"
	// MetalLBAllowSharedIP is MetalLB's spelling of AllowSharedIP (alias).
	MetalLBAllowSharedIP = "metallb.io/allow-shared-ip"
	// MetalLBLegacyAllowSharedIP is MetalLB's pre-0.14 spelling of AllowSharedIP (alias).
	MetalLBLegacyAllowSharedIP = "metallb.universe.tf/allow-shared-ip"
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

	// parse checks one value (surrounding whitespace already removed) and stores it in the spec.
	parse parseFunc
}

// Keys is the registry of every annotation key Portico reads. Parse reads exactly these keys and
// docs/annotations.md is generated from it, so the two cannot drift.
var Keys = []Key{
	{
		Name: Internal, Provider: providerAny,
		Values:  "`true` or `false`",
		Default: "`false`",
		Doc:     "Load balancer reachable only from inside the network (VPC or site). Must agree with `" + AWSLoadBalancerInternal + "` when both are set.",
		parse:   parseInternal,
	},
	{
		Name: SourceRanges, Provider: providerAny,
		Values:  "comma-separated IPv4/IPv6 CIDRs, e.g. `10.0.0.0/8, 2001:db8::/32` (a bare IP is an error)",
		Default: "everyone",
		Doc:     "Client ranges allowed to reach the load balancer. `spec.loadBalancerSourceRanges` wins over it.",
		parse:   parseSourceRanges,
	},
	{
		Name:     LoadBalancerIPs,
		Aliases:  []string{MetalLBLoadBalancerIPs, MetalLBLegacyLoadBalancerIPs, KubeVIPLoadBalancerIPs},
		Provider: providerAny,
		Values:   "comma-separated IPv4/IPv6 addresses, e.g. `198.18.128.10, 2001:db8::10`",
		Default:  "the provider chooses",
		Doc:      "Load balancer IPs to use (one per family for dual stack). The key and its aliases must list the same addresses in the same order.",
		parse:    parseLoadBalancerIPs,
	},
	{
		Name: AWSLoadBalancerInternal, Provider: providerAWS,
		Values:  "any value; empty or `false` means internet-facing, anything else (`true`, `yes`, `0.0.0.0/0`, even `False`) means internal",
		Default: "internet-facing",
		Doc:     "cloud-provider-aws's internal switch, read with its semantics. Prefer `" + Internal + "`; must agree with it when both are set.",
		parse:   parseAWSInternal,
	},
	{
		Name: AWSLoadBalancerScheme, Provider: providerAWS,
		Values:  "`internal` or `internet-facing`",
		Default: "`internet-facing`",
		Doc:     "Scheme, as the AWS Load Balancer Controller spells it. Must agree with `" + Internal + "` and `" + AWSLoadBalancerInternal + "`. A change replaces the load balancer: the new one is created first.",
		parse:   parseAWSScheme,
	},
	{
		Name: AWSLoadBalancerType, Provider: providerAWS,
		Values:  "`nlb`",
		Default: "Classic ELB",
		Doc:     "Kind of AWS load balancer. `external` and `nlb-ip` belong to the AWS Load Balancer Controller and are errors here.",
		parse:   parseAWSType,
	},
	{
		Name: AWSCrossZoneLoadBalancing, Provider: providerAWS,
		Values:  "`true` or `false`",
		Default: "AWS default for the load balancer kind",
		Doc:     "Cross-zone load balancing.",
		parse:   parseAWSCrossZone,
	},
	{
		Name: AWSAdditionalResourceTags, Provider: providerAWS,
		Values:  "`k=v,k2=v2,keyonly`; keys 1-128 characters, not starting with `aws:`; values up to 256 characters",
		Default: "none",
		Doc:     "Extra tags on the AWS resources Portico creates.",
		parse:   parseAWSTags,
	},
	{
		Name: AWSSubnets, Provider: providerAWS,
		Values:  "comma-separated subnet IDs or Name tags",
		Default: "discovered subnets",
		Doc:     "Subnets to place the load balancer in.",
		parse:   parseAWSSubnets,
	},
	{
		Name: AWSTargetNodeLabels, Provider: providerAWS,
		Values:  "`k=v,k2=v2,k3`: label keys and values; `k3` or `k3=` matches any value",
		Default: "every eligible node",
		Doc:     "Only nodes with all these labels become backends.",
		parse:   parseAWSTargetNodeLabels,
	},
	{
		Name: AWSConnectionIdleTimeout, Provider: providerAWS,
		Values:  "integer seconds, 1-4000",
		Default: "60 (AWS default)",
		Doc:     "Classic ELB connection idle timeout.",
		parse:   parseAWSIdleTimeout,
	},
	{
		Name: AWSProxyProtocol, Provider: providerAWS,
		Values:  "`*` only",
		Default: "off",
		Doc:     "PROXY protocol towards every backend (Classic ELB).",
		parse:   parseAWSProxyProtocol,
	},
	{
		Name: AWSSSLCert, Provider: providerAWS,
		Values:  "an ACM or IAM certificate ARN, e.g. `arn:aws:acm:us-east-1:123456789012:certificate/...`",
		Default: "no TLS",
		Doc:     "Certificate for the listeners named by `" + AWSSSLPorts + "`.",
		parse:   parseAWSSSLCert,
	},
	{
		Name: AWSSSLPorts, Provider: providerAWS,
		Values:  "`*`, or comma-separated port numbers and port names",
		Default: "`*`",
		Doc:     "Listeners that use the certificate.",
		parse:   parseAWSSSLPorts,
	},
	{
		Name: AWSSSLNegotiationPolicy, Provider: providerAWS,
		Values:  "a predefined policy name, e.g. `ELBSecurityPolicy-TLS13-1-2-2021-06`",
		Default: "`ELBSecurityPolicy-2016-08` (NLB), AWS default (Classic ELB)",
		Doc:     "TLS policy of the TLS listeners.",
		parse:   parseAWSSSLNegotiationPolicy,
	},
	{
		Name: AWSConnectionDrainingEnabled, Provider: providerAWS,
		Values:  "`true` or `false`",
		Default: "AWS default (off)",
		Doc:     "Classic ELB connection draining.",
		parse:   parseAWSDrainingEnabled,
	},
	{
		Name: AWSConnectionDrainingTimeout, Provider: providerAWS,
		Values:  "integer seconds, 1-3600",
		Default: "300 (AWS default)",
		Doc:     "Classic ELB connection draining timeout.",
		parse:   parseAWSDrainingTimeout,
	},
	{
		Name: AWSSecurityGroups, Provider: providerAWS,
		Values:  "comma-separated security group IDs (`sg-...`)",
		Default: "one group per load balancer, owned by Portico",
		Doc:     "Security groups of the Classic ELB, replacing its own group.",
		parse:   parseAWSSecurityGroups,
	},
	{
		Name: AWSExtraSecurityGroups, Provider: providerAWS,
		Values:  "comma-separated security group IDs (`sg-...`)",
		Default: "none",
		Doc:     "Security groups added to the Classic ELB's groups.",
		parse:   parseAWSExtraSecurityGroups,
	},
	{
		Name: AWSBackendProtocol, Provider: providerAWS,
		Values:  "`http`, `https`, `ssl`, `tcp` (any case)",
		Default: "`tcp`",
		Doc:     "Protocol between the load balancer and the backends.",
		parse:   parseAWSBackendProtocol,
	},
	{
		Name: AWSHealthCheckProtocol, Provider: providerAWS,
		Values:  "`TCP`, `HTTP`, `HTTPS` (any case)",
		Default: "`TCP`, or `HTTP` to the health-check node port for `externalTrafficPolicy: Local`",
		Doc:     "Target health-check protocol.",
		parse:   parseAWSHealthCheckProtocol,
	},
	{
		Name: AWSHealthCheckPort, Provider: providerAWS,
		Values:  "`traffic-port` or a port number 1-65535",
		Default: "`traffic-port`, or the health-check node port for `externalTrafficPolicy: Local`",
		Doc:     "Target health-check port.",
		parse:   parseAWSHealthCheckPort,
	},
	{
		Name: AWSHealthCheckPath, Provider: providerAWS,
		Values:  "a path starting with `/`, up to 1024 characters, no whitespace",
		Default: "`/healthz` on the health-check node port; unused for TCP checks",
		Doc:     "HTTP(S) health-check path.",
		parse:   parseAWSHealthCheckPath,
	},
	{
		Name: AWSHealthCheckHealthyThreshold, Provider: providerAWS,
		Values:  "integer 2-10",
		Default: "provider default for the load balancer kind",
		Doc:     "Consecutive passed checks before a target is healthy.",
		parse:   parseAWSHealthyThreshold,
	},
	{
		Name: AWSHealthCheckUnhealthyThreshold, Provider: providerAWS,
		Values:  "integer 2-10",
		Default: "provider default for the load balancer kind",
		Doc:     "Consecutive failed checks before a target is unhealthy.",
		parse:   parseAWSUnhealthyThreshold,
	},
	{
		Name: AWSHealthCheckTimeout, Provider: providerAWS,
		Values:  "integer seconds, 2-120",
		Default: "provider default for the load balancer kind",
		Doc:     "Health-check timeout.",
		parse:   parseAWSHealthCheckTimeout,
	},
	{
		Name: AWSHealthCheckInterval, Provider: providerAWS,
		Values:  "integer seconds, 5-300",
		Default: "provider default for the load balancer kind",
		Doc:     "Time between health checks.",
		parse:   parseAWSHealthCheckInterval,
	},
	{
		Name:     AddressPool,
		Aliases:  []string{MetalLBAddressPool, MetalLBLegacyAddressPool},
		Provider: providerBareMetal,
		Values:   "a pool name (DNS-1123 subdomain)",
		Default:  "any pool that auto-assigns",
		Doc:      "VIP pool to allocate from. The key and its aliases must agree.",
		parse:    parseAddressPool,
	},
	{
		Name:     AllowSharedIP,
		Aliases:  []string{MetalLBAllowSharedIP, MetalLBLegacyAllowSharedIP},
		Provider: providerBareMetal,
		Values:   "any non-empty string",
		Default:  "no sharing",
		Doc:      "Sharing key: Services with the same key may share a VIP. The key and its aliases must agree.",
		parse:    parseAllowSharedIP,
	},
}
