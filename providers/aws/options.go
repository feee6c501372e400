package aws

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// A Service's AWS settings: the service.beta.kubernetes.io/aws-load-balancer-* keys (declared
// and documented in package annotations) parsed into ServiceOptions by ParseOptions, which the
// controller calls before Ensure. The rules of the keys are in options_common.go (both kinds),
// options_classic.go, options_nlb.go and options_healthcheck.go; the internal and scheme keys are
// the common spec's (annotations.Parse), which arrives as LoadBalancer.Internal.

// Kind is the kind of AWS load balancer.
type Kind string

// AWS load balancer kinds.
const (
	Classic Kind = "classic"
	NLB     Kind = "nlb"
)

// ServiceOptions are the AWS settings of one Service, the provider's own part of the desired
// load balancer (providers.LoadBalancer.Options). Zero values mean "not set"; pointers tell "not
// set" from an explicit false or zero.
type ServiceOptions struct {
	// Kind is NLB when the type annotation asks for one, "" when it is absent (the configured
	// default kind applies).
	Kind                  Kind
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
	HealthCheck     HealthCheckOptions
	AccessLog       AccessLogOptions
	// TargetGroupAttributes are NLB target-group attributes by AWS key, values as AWS spells them.
	TargetGroupAttributes map[string]string
	// EIPAllocations and PrivateIPv4Addresses are the NLB's addresses, one per subnet.
	EIPAllocations       []string
	PrivateIPv4Addresses []netip.Addr
	// IPAddressType is "", "ipv4" or "dualstack".
	IPAddressType string
	// ManageBackendSecurityGroupRules is nil when not set (true).
	ManageBackendSecurityGroupRules *bool
	// ALPNPolicy is "" or one of HTTP1Only, HTTP2Only, HTTP2Optional, HTTP2Preferred, None.
	ALPNPolicy string
	// NLBTargetType is "" or "instance" (the only one accepted).
	NLBTargetType string
}

// AccessLogOptions configure access logs to S3.
type AccessLogOptions struct {
	Enabled *bool
	// EmitInterval is in minutes (5 or 60); nil means the AWS default.
	EmitInterval *int32
	Bucket       string
	Prefix       string
}

// HealthCheckOptions override the default target health check.
type HealthCheckOptions struct {
	Protocol           string // TCP, HTTP, HTTPS
	Port               string // "traffic-port" or a number
	Path               string
	HealthyThreshold   *int32
	UnhealthyThreshold *int32
	Timeout            *time.Duration
	Interval           *time.Duration
}

// optionRules are the keys ParseOptions reads, in the order of annotations.Keys.
var optionRules = []annotations.Rule[ServiceOptions]{
	{Key: annotations.AWSLoadBalancerType, Parse: parseType},
	{Key: annotations.AWSCrossZoneLoadBalancing, Parse: parseCrossZone},
	{Key: annotations.AWSAdditionalResourceTags, Parse: parseTags},
	{Key: annotations.AWSSubnets, Parse: parseSubnets},
	{Key: annotations.AWSTargetNodeLabels, Parse: parseTargetNodeLabels},
	{Key: annotations.AWSConnectionIdleTimeout, Parse: parseIdleTimeout},
	{Key: annotations.AWSProxyProtocol, Parse: parseProxyProtocol},
	{Key: annotations.AWSSSLCert, Parse: parseSSLCert},
	{Key: annotations.AWSSSLPorts, Parse: parseSSLPorts},
	{Key: annotations.AWSSSLNegotiationPolicy, Parse: parseSSLNegotiationPolicy},
	{Key: annotations.AWSConnectionDrainingEnabled, Parse: parseDrainingEnabled},
	{Key: annotations.AWSConnectionDrainingTimeout, Parse: parseDrainingTimeout},
	{Key: annotations.AWSSecurityGroups, Parse: parseSecurityGroups},
	{Key: annotations.AWSExtraSecurityGroups, Parse: parseExtraSecurityGroups},
	{Key: annotations.AWSBackendProtocol, Parse: parseBackendProtocol},
	{Key: annotations.AWSHealthCheckProtocol, Parse: parseHealthCheckProtocol},
	{Key: annotations.AWSHealthCheckPort, Parse: parseHealthCheckPort},
	{Key: annotations.AWSHealthCheckPath, Parse: parseHealthCheckPath},
	{Key: annotations.AWSHealthCheckHealthyThreshold, Parse: parseHealthyThreshold},
	{Key: annotations.AWSHealthCheckUnhealthyThreshold, Parse: parseUnhealthyThreshold},
	{Key: annotations.AWSHealthCheckTimeout, Parse: parseHealthCheckTimeout},
	{Key: annotations.AWSHealthCheckInterval, Parse: parseHealthCheckInterval},
	{Key: annotations.AWSAccessLogEnabled, Parse: parseAccessLogEnabled},
	{Key: annotations.AWSAccessLogEmitInterval, Parse: parseAccessLogEmitInterval},
	{Key: annotations.AWSAccessLogS3BucketName, Parse: parseAccessLogBucket},
	{Key: annotations.AWSAccessLogS3BucketPrefix, Parse: parseAccessLogPrefix},
	{Key: annotations.AWSTargetGroupAttributes, Parse: parseTargetGroupAttributes},
	{Key: annotations.AWSEIPAllocations, Parse: parseEIPAllocations},
	{Key: annotations.AWSPrivateIPv4Addresses, Parse: parsePrivateIPv4Addresses},
	{Key: annotations.AWSNLBTargetType, Parse: parseNLBTargetType},
	{Key: annotations.AWSIPAddressType, Parse: parseIPAddressType},
	{Key: annotations.AWSManageBackendSecurityGroupRules, Parse: parseManageBackendSGRules},
	{Key: annotations.AWSALPNPolicy, Parse: parseALPNPolicy},
}

// ParseServiceOptions reads a Service's AWS keys strictly: the typed options and every problem,
// at metadata.annotations[<key>].
func ParseServiceOptions(ann map[string]string) (ServiceOptions, field.ErrorList) {
	return annotations.ParseSection(ann, optionRules)
}

// ParseOptions implements providers.Provider with ParseServiceOptions.
func (p *Provider) ParseOptions(ann map[string]string) (providers.ServiceOptions, field.ErrorList) {
	return ParseServiceOptions(ann)
}

// optionsOf returns lb's AWS options: the zero value when none were given.
func optionsOf(lb *providers.LoadBalancer) (ServiceOptions, error) {
	return providers.OptionsOf[ServiceOptions](lb, "aws")
}
