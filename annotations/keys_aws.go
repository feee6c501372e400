package annotations

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
	// Values: "true" or "false". Default: off (both kinds, as cloud-provider-aws); removing the
	// annotation turns it off again.
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
	// Values: integer seconds, 1 to 4000. Default: 60 (the AWS default), restored when the
	// annotation is removed.
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
	// Values: "true" or "false". Default: off (the AWS default), restored when the annotation
	// is removed.
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
	// Values: integer seconds, 2 to 60 and less than the interval for a Classic ELB, 2 to 120
	// and at most the interval for an NLB (as AWS enforces them; other values are rejected
	// before anything is created). Default: the provider default for the load balancer kind.
	AWSHealthCheckTimeout = awsPrefix + "aws-load-balancer-healthcheck-timeout"

	// AWSHealthCheckInterval is the time between health checks.
	// Values: integer seconds, 5 to 300. Default: the provider default for the load balancer kind.
	AWSHealthCheckInterval = awsPrefix + "aws-load-balancer-healthcheck-interval"

	// AWSAccessLogEnabled turns access logs to S3 on or off.
	// Values: "true" or "false". Default: off (the AWS default); removing the annotation turns
	// logs off. Needs AWSAccessLogS3BucketName when true.
	AWSAccessLogEnabled = awsPrefix + "aws-load-balancer-access-log-enabled"

	// AWSAccessLogEmitInterval is the Classic ELB access-log publishing interval.
	// Values: 5 or 60 (minutes). Default: 60 (the AWS default).
	AWSAccessLogEmitInterval = awsPrefix + "aws-load-balancer-access-log-emit-interval"

	// AWSAccessLogS3BucketName is the S3 bucket of the access logs.
	// Values: an S3 bucket name (3-63 characters: lower-case letters, digits, '.', '-').
	AWSAccessLogS3BucketName = awsPrefix + "aws-load-balancer-access-log-s3-bucket-name"

	// AWSAccessLogS3BucketPrefix is the key prefix of the access logs in the bucket.
	// Values: a prefix without leading or trailing '/'. Default: the bucket's root.
	AWSAccessLogS3BucketPrefix = awsPrefix + "aws-load-balancer-access-log-s3-bucket-prefix"

	// AWSTargetGroupAttributes sets NLB target-group attributes.
	// Values: "k=v,k2=v2" with keys proxy_protocol_v2.enabled, preserve_client_ip.enabled,
	// deregistration_delay.timeout_seconds, deregistration_delay.connection_termination.enabled,
	// stickiness.enabled, stickiness.type (source_ip). Default: the AWS defaults for instance
	// targets; a key removed from the annotation returns to its default.
	AWSTargetGroupAttributes = awsPrefix + "aws-load-balancer-target-group-attributes"

	// AWSEIPAllocations gives an internet-facing NLB these Elastic IPs, one per subnet, in subnet
	// order. Values: comma-separated allocation IDs (eipalloc-...). Creation only.
	AWSEIPAllocations = awsPrefix + "aws-load-balancer-eip-allocations"

	// AWSPrivateIPv4Addresses gives an internal NLB these private addresses, one per subnet, in
	// subnet order. Values: comma-separated IPv4 addresses. Creation only.
	AWSPrivateIPv4Addresses = awsPrefix + "aws-load-balancer-private-ipv4-addresses"

	// AWSNLBTargetType is the NLB target type. Values: "instance" only; "ip" targets belong to
	// the AWS Load Balancer Controller. Default: instance.
	AWSNLBTargetType = awsPrefix + "aws-load-balancer-nlb-target-type"

	// AWSIPAddressType is the NLB's address type. Values: "ipv4" or "dualstack". Default: ipv4.
	AWSIPAddressType = awsPrefix + "aws-load-balancer-ip-address-type"

	// AWSManageBackendSecurityGroupRules lets Portico add and remove the rules in the nodes'
	// security groups that let the load balancer's traffic in. Values: "true" or "false".
	// Default: true.
	AWSManageBackendSecurityGroupRules = awsPrefix + "aws-load-balancer-manage-backend-security-group-rules"

	// AWSALPNPolicy is the ALPN policy of the NLB's TLS listeners.
	// Values: HTTP1Only, HTTP2Only, HTTP2Optional, HTTP2Preferred, None. Default: None.
	AWSALPNPolicy = awsPrefix + "aws-load-balancer-alpn-policy"
)

// awsKeys are the AWS provider's keys. The internal and scheme keys are read by Parse into the
// common Internal; providers/aws reads the others into its Options.
var awsKeys = []Key{
	{
		Name: AWSLoadBalancerInternal, Provider: providerAWS,
		Values:  "any value; empty or `false` means internet-facing, anything else (`true`, `yes`, `0.0.0.0/0`, even `False`) means internal",
		Default: "internet-facing",
		Doc:     "cloud-provider-aws's internal switch, read with its semantics. Prefer `" + Internal + "`; must agree with it when both are set.",
	},
	{
		Name: AWSLoadBalancerScheme, Provider: providerAWS,
		Values:  "`internal` or `internet-facing`",
		Default: "`internet-facing`",
		Doc:     "Scheme, as the AWS Load Balancer Controller spells it. Must agree with `" + Internal + "` and `" + AWSLoadBalancerInternal + "`. A change replaces the load balancer: the new one is created first.",
	},
	{
		Name: AWSLoadBalancerType, Provider: providerAWS,
		Values:  "`nlb`",
		Default: "Classic ELB",
		Doc:     "Kind of AWS load balancer. `external` and `nlb-ip` belong to the AWS Load Balancer Controller and are errors here.",
	},
	{
		Name: AWSCrossZoneLoadBalancing, Provider: providerAWS,
		Values:  "`true` or `false`",
		Default: "off (restored when removed)",
		Doc:     "Cross-zone load balancing.",
	},
	{
		Name: AWSAdditionalResourceTags, Provider: providerAWS,
		Values:  "`k=v,k2=v2,keyonly`; keys 1-128 characters, not starting with `aws:`; values up to 256 characters",
		Default: "none",
		Doc:     "Extra tags on the AWS resources Portico creates.",
	},
	{
		Name: AWSSubnets, Provider: providerAWS,
		Values:  "comma-separated subnet IDs or Name tags",
		Default: "discovered subnets",
		Doc:     "Subnets to place the load balancer in.",
	},
	{
		Name: AWSTargetNodeLabels, Provider: providerAWS,
		Values:  "`k=v,k2=v2,k3`: label keys and values; `k3` or `k3=` matches any value",
		Default: "every eligible node",
		Doc:     "Only nodes with all these labels become backends.",
	},
	{
		Name: AWSConnectionIdleTimeout, Provider: providerAWS,
		Values:  "integer seconds, 1-4000",
		Default: "60 (AWS default; restored when removed)",
		Doc:     "Classic ELB connection idle timeout.",
	},
	{
		Name: AWSProxyProtocol, Provider: providerAWS,
		Values:  "`*` only",
		Default: "off",
		Doc:     "PROXY protocol towards every backend (Classic ELB).",
	},
	{
		Name: AWSSSLCert, Provider: providerAWS,
		Values:  "an ACM or IAM certificate ARN, e.g. `arn:aws:acm:us-east-1:123456789012:certificate/...`",
		Default: "no TLS",
		Doc:     "Certificate for the listeners named by `" + AWSSSLPorts + "`.",
	},
	{
		Name: AWSSSLPorts, Provider: providerAWS,
		Values:  "`*`, or comma-separated port numbers and port names",
		Default: "`*`",
		Doc:     "Listeners that use the certificate.",
	},
	{
		Name: AWSSSLNegotiationPolicy, Provider: providerAWS,
		Values:  "a predefined policy name, e.g. `ELBSecurityPolicy-TLS13-1-2-2021-06`",
		Default: "`ELBSecurityPolicy-2016-08` (NLB), AWS default (Classic ELB)",
		Doc:     "TLS policy of the TLS listeners.",
	},
	{
		Name: AWSConnectionDrainingEnabled, Provider: providerAWS,
		Values:  "`true` or `false`",
		Default: "off (AWS default; restored when removed)",
		Doc:     "Classic ELB connection draining.",
	},
	{
		Name: AWSConnectionDrainingTimeout, Provider: providerAWS,
		Values:  "integer seconds, 1-3600",
		Default: "300 (AWS default; restored when removed)",
		Doc:     "Classic ELB connection draining timeout.",
	},
	{
		Name: AWSSecurityGroups, Provider: providerAWS,
		Values:  "comma-separated security group IDs (`sg-...`)",
		Default: "one group per load balancer, owned by Portico",
		Doc:     "Security groups of the Classic ELB, replacing its own group.",
	},
	{
		Name: AWSExtraSecurityGroups, Provider: providerAWS,
		Values:  "comma-separated security group IDs (`sg-...`)",
		Default: "none",
		Doc:     "Security groups added to the Classic ELB's groups.",
	},
	{
		Name: AWSBackendProtocol, Provider: providerAWS,
		Values:  "`http`, `https`, `ssl`, `tcp` (any case)",
		Default: "`tcp`",
		Doc:     "Protocol between the load balancer and the backends.",
	},
	{
		Name: AWSHealthCheckProtocol, Provider: providerAWS,
		Values:  "`TCP`, `HTTP`, `HTTPS` (any case)",
		Default: "`TCP`, or `HTTP` to the health-check node port for `externalTrafficPolicy: Local`",
		Doc:     "Target health-check protocol.",
	},
	{
		Name: AWSHealthCheckPort, Provider: providerAWS,
		Values:  "`traffic-port` or a port number 1-65535",
		Default: "`traffic-port`, or the health-check node port for `externalTrafficPolicy: Local`",
		Doc:     "Target health-check port.",
	},
	{
		Name: AWSHealthCheckPath, Provider: providerAWS,
		Values:  "a path starting with `/`, up to 1024 characters, no whitespace",
		Default: "`/healthz` on the health-check node port; unused for TCP checks",
		Doc:     "HTTP(S) health-check path.",
	},
	{
		Name: AWSHealthCheckHealthyThreshold, Provider: providerAWS,
		Values:  "integer 2-10",
		Default: "provider default for the load balancer kind",
		Doc:     "Consecutive passed checks before a target is healthy.",
	},
	{
		Name: AWSHealthCheckUnhealthyThreshold, Provider: providerAWS,
		Values:  "integer 2-10",
		Default: "provider default for the load balancer kind",
		Doc:     "Consecutive failed checks before a target is unhealthy.",
	},
	{
		Name: AWSHealthCheckTimeout, Provider: providerAWS,
		Values:  "integer seconds: 2-60 and less than the interval (Classic ELB), 2-120 and at most the interval (NLB)",
		Default: "provider default for the load balancer kind",
		Doc:     "Health-check timeout.",
	},
	{
		Name: AWSHealthCheckInterval, Provider: providerAWS,
		Values:  "integer seconds, 5-300",
		Default: "provider default for the load balancer kind",
		Doc:     "Time between health checks.",
	},
	{
		Name: AWSAccessLogEnabled, Provider: providerAWS,
		Values:  "`true` or `false`; `true` needs `" + AWSAccessLogS3BucketName + "`",
		Default: "off (AWS default; restored when removed)",
		Doc:     "Access logs to S3.",
	},
	{
		Name: AWSAccessLogEmitInterval, Provider: providerAWS,
		Values:  "`5` or `60` (minutes)",
		Default: "60 (AWS default)",
		Doc:     "Classic ELB access-log publishing interval.",
	},
	{
		Name: AWSAccessLogS3BucketName, Provider: providerAWS,
		Values:  "an S3 bucket name: 3-63 lower-case letters, digits, `.` and `-`",
		Default: "none",
		Doc:     "S3 bucket of the access logs.",
	},
	{
		Name: AWSAccessLogS3BucketPrefix, Provider: providerAWS,
		Values:  "a key prefix without leading or trailing `/`, up to 512 characters",
		Default: "the bucket's root",
		Doc:     "Key prefix of the access logs in the bucket.",
	},
	{
		Name: AWSTargetGroupAttributes, Provider: providerAWS,
		Values: "`k=v,k2=v2` with `proxy_protocol_v2.enabled`, `preserve_client_ip.enabled`, `deregistration_delay.connection_termination.enabled`, " +
			"`stickiness.enabled` (`true`/`false`), `deregistration_delay.timeout_seconds` (0-3600), `stickiness.type` (`source_ip`)",
		Default: "AWS defaults for instance targets (a removed key returns to its default)",
		Doc:     "NLB target-group attributes, set on each target group of the Service whose protocol takes them (no stickiness on TLS, client IP preservation fixed on UDP and TCP_UDP; a key left out warns).",
	},
	{
		Name: AWSEIPAllocations, Provider: providerAWS,
		Values:  "comma-separated Elastic IP allocation IDs (`eipalloc-...`), one per subnet",
		Default: "AWS-assigned addresses",
		Doc:     "Elastic IPs of an internet-facing NLB, in subnet order. Used when the NLB is created.",
	},
	{
		Name: AWSPrivateIPv4Addresses, Provider: providerAWS,
		Values:  "comma-separated IPv4 addresses, one per subnet, each inside its subnet",
		Default: "AWS-assigned addresses",
		Doc:     "Private addresses of an internal NLB, in subnet order. Used when the NLB is created.",
	},
	{
		Name: AWSNLBTargetType, Provider: providerAWS,
		Values:  "`instance`",
		Default: "`instance`",
		Doc:     "NLB target type. `ip` targets belong to the AWS Load Balancer Controller and are an error here.",
	},
	{
		Name: AWSIPAddressType, Provider: providerAWS,
		Values:  "`ipv4` or `dualstack`",
		Default: "`ipv4`",
		Doc:     "Address type of the NLB: `dualstack` also accepts IPv6 clients (the subnets need IPv6 ranges).",
	},
	{
		Name: AWSManageBackendSecurityGroupRules, Provider: providerAWS,
		Values:  "`true` or `false`",
		Default: "`true`",
		Doc:     "Whether Portico adds and removes the rules in the nodes' security groups that let the load balancer's traffic in. With `false` it leaves them alone (deleting the Service still removes the rules Portico wrote).",
	},
	{
		Name: AWSALPNPolicy, Provider: providerAWS,
		Values:  "`HTTP1Only`, `HTTP2Only`, `HTTP2Optional`, `HTTP2Preferred`, `None`",
		Default: "`None`",
		Doc:     "ALPN policy of the NLB's TLS listeners.",
	},
}
