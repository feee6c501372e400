package aws

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/annotations/annotationstest"
	"github.com/portico-lb/portico/providers/providertest"
)

type (
	wantErr     = annotationstest.WantErr
	optionsCase = annotationstest.Case[ServiceOptions]
)

func boolp(b bool) *bool        { return &b }
func int32p(n int32) *int32     { return &n }
func secs(n int) *time.Duration { d := time.Duration(n) * time.Second; return &d }
func addrList(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

var optionsCases = []optionsCase{
	// several problems at once, sorted by key; other sections' keys are not read
	{Name: "every problem reported in key order", In: map[string]string{
		annotations.Internal: "yes", annotations.AWSLoadBalancerType: "external", annotations.AddressPool: "UPPER",
		annotations.AWSHealthCheckInterval: "1", annotations.AWSSubnets: "subnet-1"},
		Want: func(o *ServiceOptions) { o.Subnets = []string{"subnet-1"} },
		Errs: []wantErr{
			{Key: annotations.AWSHealthCheckInterval, Bad: "1", Contains: "from 5 to 300"},
			{Key: annotations.AWSLoadBalancerType, Bad: "external", Contains: "AWS Load Balancer Controller"},
		}},

	// aws-load-balancer-type
	{Name: "type nlb", In: map[string]string{annotations.AWSLoadBalancerType: "nlb"}, Want: func(o *ServiceOptions) { o.Kind = NLB }},
	{Name: "type external belongs to the LBC", In: map[string]string{annotations.AWSLoadBalancerType: "external"},
		Errs: []wantErr{{Key: annotations.AWSLoadBalancerType, Bad: "external", Contains: "AWS Load Balancer Controller"}}},
	{Name: "type nlb-ip belongs to the LBC", In: map[string]string{annotations.AWSLoadBalancerType: "nlb-ip"},
		Errs: []wantErr{{Key: annotations.AWSLoadBalancerType, Bad: "nlb-ip", Contains: "AWS Load Balancer Controller"}}},
	{Name: "type NLB is case-sensitive", In: map[string]string{annotations.AWSLoadBalancerType: "NLB"}, Errs: []wantErr{{Key: annotations.AWSLoadBalancerType, Bad: "NLB", Contains: `must be "nlb"`}}},
	{Name: "type classic is not a value", In: map[string]string{annotations.AWSLoadBalancerType: "classic"}, Errs: []wantErr{{Key: annotations.AWSLoadBalancerType, Bad: "classic", Contains: `must be "nlb"`}}},
	{Name: "type empty", In: map[string]string{annotations.AWSLoadBalancerType: ""}, Errs: []wantErr{{Key: annotations.AWSLoadBalancerType, Bad: "", Contains: `must be "nlb"`}}},

	// aws-load-balancer-cross-zone-load-balancing-enabled
	{Name: "cross zone true", In: map[string]string{annotations.AWSCrossZoneLoadBalancing: "true"}, Want: func(o *ServiceOptions) { o.CrossZone = boolp(true) }},
	{Name: "cross zone false is not unset", In: map[string]string{annotations.AWSCrossZoneLoadBalancing: "false"}, Want: func(o *ServiceOptions) { o.CrossZone = boolp(false) }},
	{Name: "cross zone yes", In: map[string]string{annotations.AWSCrossZoneLoadBalancing: "yes"}, Errs: []wantErr{{Key: annotations.AWSCrossZoneLoadBalancing, Bad: "yes", Contains: `"true" or "false"`}}},
	{Name: "cross zone 1", In: map[string]string{annotations.AWSCrossZoneLoadBalancing: "1"}, Errs: []wantErr{{Key: annotations.AWSCrossZoneLoadBalancing, Bad: "1", Contains: `"true" or "false"`}}},

	// aws-load-balancer-additional-resource-tags
	{Name: "tags", In: map[string]string{annotations.AWSAdditionalResourceTags: "team=web, env = prod,keyonly,eq=a=b"},
		Want: func(o *ServiceOptions) {
			o.AdditionalTags = map[string]string{"team": "web", "env": "prod", "keyonly": "", "eq": "a=b"}
		}},
	{Name: "tags at the limits", In: map[string]string{annotations.AWSAdditionalResourceTags: strings.Repeat("k", 128) + "=" + strings.Repeat("é", 256)},
		Want: func(o *ServiceOptions) {
			o.AdditionalTags = map[string]string{strings.Repeat("k", 128): strings.Repeat("é", 256)}
		}},
	{Name: "tags empty key", In: map[string]string{annotations.AWSAdditionalResourceTags: "a=1,=v"},
		Errs: []wantErr{{Key: annotations.AWSAdditionalResourceTags, Bad: "=v", Contains: "tag key must not be empty"}}},
	{Name: "tags too long", In: map[string]string{annotations.AWSAdditionalResourceTags: strings.Repeat("k", 129) + "=v,k=" + strings.Repeat("v", 257)},
		Errs: []wantErr{{Key: annotations.AWSAdditionalResourceTags, Bad: strings.Repeat("k", 129), Contains: "at most 128"}, {Key: annotations.AWSAdditionalResourceTags, Bad: strings.Repeat("v", 257), Contains: "at most 256"}}},
	{Name: "tags reserved prefix", In: map[string]string{annotations.AWSAdditionalResourceTags: "AWS:foo=bar"},
		Errs: []wantErr{{Key: annotations.AWSAdditionalResourceTags, Bad: "AWS:foo", Contains: "reserved"}}},
	{Name: "tags duplicate key", In: map[string]string{annotations.AWSAdditionalResourceTags: "a=1, a=2"},
		Errs: []wantErr{{Key: annotations.AWSAdditionalResourceTags, Bad: "a=2", Contains: "duplicate key"}}},
	{Name: "tags empty item", In: map[string]string{annotations.AWSAdditionalResourceTags: "a=1,,b"},
		Errs: []wantErr{{Key: annotations.AWSAdditionalResourceTags, Bad: "a=1,,b", Contains: "empty item"}}},

	// aws-load-balancer-subnets
	{Name: "subnets", In: map[string]string{annotations.AWSSubnets: "subnet-0abc, my-public-subnet"},
		Want: func(o *ServiceOptions) { o.Subnets = []string{"subnet-0abc", "my-public-subnet"} }},
	{Name: "subnets duplicate", In: map[string]string{annotations.AWSSubnets: "subnet-1,subnet-1"},
		Errs: []wantErr{{Key: annotations.AWSSubnets, Bad: "subnet-1", Contains: "duplicate subnet"}}},
	{Name: "subnets trailing comma", In: map[string]string{annotations.AWSSubnets: "subnet-1,"},
		Errs: []wantErr{{Key: annotations.AWSSubnets, Bad: "subnet-1,", Contains: "empty item"}}},

	// aws-load-balancer-target-node-labels
	{Name: "target node labels", In: map[string]string{annotations.AWSTargetNodeLabels: "node-role=lb, zone=,kubernetes.io/os=linux,ready"},
		Want: func(o *ServiceOptions) {
			o.TargetNodeLabels = map[string]string{"node-role": "lb", "zone": "", "kubernetes.io/os": "linux", "ready": ""}
		}},
	{Name: "target node labels bad key and value", In: map[string]string{annotations.AWSTargetNodeLabels: "bad key=x,k=bad value"},
		Errs: []wantErr{{Key: annotations.AWSTargetNodeLabels, Bad: "bad key", Contains: "invalid label key"}, {Key: annotations.AWSTargetNodeLabels, Bad: "bad value", Contains: "invalid label value"}}},
	{Name: "target node labels duplicate", In: map[string]string{annotations.AWSTargetNodeLabels: "k=1,k=2"},
		Errs: []wantErr{{Key: annotations.AWSTargetNodeLabels, Bad: "k=2", Contains: "duplicate key"}}},

	// aws-load-balancer-connection-idle-timeout
	{Name: "idle timeout min", In: map[string]string{annotations.AWSConnectionIdleTimeout: "1"}, Want: func(o *ServiceOptions) { o.ConnectionIdleTimeout = secs(1) }},
	{Name: "idle timeout max", In: map[string]string{annotations.AWSConnectionIdleTimeout: "4000"}, Want: func(o *ServiceOptions) { o.ConnectionIdleTimeout = secs(4000) }},
	{Name: "idle timeout zero", In: map[string]string{annotations.AWSConnectionIdleTimeout: "0"}, Errs: []wantErr{{Key: annotations.AWSConnectionIdleTimeout, Bad: "0", Contains: "from 1 to 4000"}}},
	{Name: "idle timeout too big", In: map[string]string{annotations.AWSConnectionIdleTimeout: "4001"}, Errs: []wantErr{{Key: annotations.AWSConnectionIdleTimeout, Bad: "4001", Contains: "from 1 to 4000"}}},
	{Name: "idle timeout with unit", In: map[string]string{annotations.AWSConnectionIdleTimeout: "60s"}, Errs: []wantErr{{Key: annotations.AWSConnectionIdleTimeout, Bad: "60s", Contains: "integer number of seconds"}}},

	// aws-load-balancer-proxy-protocol
	{Name: "proxy protocol", In: map[string]string{annotations.AWSProxyProtocol: "*"}, Want: func(o *ServiceOptions) { o.ProxyProtocol = true }},
	{Name: "proxy protocol true", In: map[string]string{annotations.AWSProxyProtocol: "true"}, Errs: []wantErr{{Key: annotations.AWSProxyProtocol, Bad: "true", Contains: `must be "*"`}}},
	{Name: "proxy protocol empty", In: map[string]string{annotations.AWSProxyProtocol: ""}, Errs: []wantErr{{Key: annotations.AWSProxyProtocol, Bad: "", Contains: `must be "*"`}}},

	// aws-load-balancer-ssl-cert
	{Name: "ssl cert ACM", In: map[string]string{annotations.AWSSSLCert: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b"},
		Want: func(o *ServiceOptions) { o.SSLCert = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b" }},
	{Name: "ssl cert IAM", In: map[string]string{annotations.AWSSSLCert: "arn:aws-cn:iam::123456789012:server-certificate/web"},
		Want: func(o *ServiceOptions) { o.SSLCert = "arn:aws-cn:iam::123456789012:server-certificate/web" }},
	{Name: "ssl cert name", In: map[string]string{annotations.AWSSSLCert: "my-cert"}, Errs: []wantErr{{Key: annotations.AWSSSLCert, Bad: "my-cert", Contains: "certificate ARN"}}},
	{Name: "ssl cert other service", In: map[string]string{annotations.AWSSSLCert: "arn:aws:s3:::bucket"}, Errs: []wantErr{{Key: annotations.AWSSSLCert, Bad: "arn:aws:s3:::bucket", Contains: "certificate ARN"}}},
	{Name: "ssl cert with space", In: map[string]string{annotations.AWSSSLCert: "arn:aws:acm:us-east-1:1:certificate/a b"},
		Errs: []wantErr{{Key: annotations.AWSSSLCert, Bad: "arn:aws:acm:us-east-1:1:certificate/a b", Contains: "certificate ARN"}}},
	{Name: "ssl cert empty", In: map[string]string{annotations.AWSSSLCert: ""}, Errs: []wantErr{{Key: annotations.AWSSSLCert, Bad: "", Contains: "certificate ARN"}}},

	// aws-load-balancer-ssl-ports
	{Name: "ssl ports star", In: map[string]string{annotations.AWSSSLPorts: "*"}, Want: func(o *ServiceOptions) { o.SSLPorts = []string{"*"} }},
	{Name: "ssl ports numbers and names", In: map[string]string{annotations.AWSSSLPorts: "443, https,08443"},
		Want: func(o *ServiceOptions) { o.SSLPorts = []string{"443", "https", "8443"} }},
	{Name: "ssl ports star combined", In: map[string]string{annotations.AWSSSLPorts: "*,443"}, Errs: []wantErr{{Key: annotations.AWSSSLPorts, Bad: "*,443", Contains: "cannot be combined"}}},
	{Name: "ssl ports bad items", In: map[string]string{annotations.AWSSSLPorts: "70000,HTTPS,443,0443"},
		Errs: []wantErr{{Key: annotations.AWSSSLPorts, Bad: "0443", Contains: "duplicate port"}, {Key: annotations.AWSSSLPorts, Bad: "70000", Contains: "out of range"}, {Key: annotations.AWSSSLPorts, Bad: "HTTPS", Contains: "not a port number or port name"}}},
	{Name: "ssl ports empty", In: map[string]string{annotations.AWSSSLPorts: ""}, Errs: []wantErr{{Key: annotations.AWSSSLPorts, Bad: "", Contains: "must not be empty"}}},

	// aws-load-balancer-backend-protocol
	{Name: "backend protocol", In: map[string]string{annotations.AWSBackendProtocol: "HTTP"}, Want: func(o *ServiceOptions) { o.BackendProtocol = "http" }},
	{Name: "backend protocol ssl", In: map[string]string{annotations.AWSBackendProtocol: "ssl"}, Want: func(o *ServiceOptions) { o.BackendProtocol = "ssl" }},
	{Name: "backend protocol udp", In: map[string]string{annotations.AWSBackendProtocol: "udp"}, Errs: []wantErr{{Key: annotations.AWSBackendProtocol, Bad: "udp", Contains: `"http", "https", "ssl", "tcp"`}}},

	// health checks
	{Name: "health check all set", In: map[string]string{
		annotations.AWSHealthCheckProtocol: "http", annotations.AWSHealthCheckPort: "8080", annotations.AWSHealthCheckPath: "/healthz",
		annotations.AWSHealthCheckHealthyThreshold: "2", annotations.AWSHealthCheckUnhealthyThreshold: "10",
		annotations.AWSHealthCheckTimeout: "2", annotations.AWSHealthCheckInterval: "300"},
		Want: func(o *ServiceOptions) {
			o.HealthCheck = HealthCheckOptions{Protocol: "HTTP", Port: "8080", Path: "/healthz",
				HealthyThreshold: int32p(2), UnhealthyThreshold: int32p(10), Timeout: secs(2), Interval: secs(300)}
		}},
	{Name: "health check other bounds", In: map[string]string{
		annotations.AWSHealthCheckProtocol: "Https", annotations.AWSHealthCheckPort: "traffic-port", annotations.AWSHealthCheckHealthyThreshold: "10",
		annotations.AWSHealthCheckUnhealthyThreshold: "2", annotations.AWSHealthCheckTimeout: "120", annotations.AWSHealthCheckInterval: "5"},
		Want: func(o *ServiceOptions) {
			o.HealthCheck = HealthCheckOptions{Protocol: "HTTPS", Port: "traffic-port",
				HealthyThreshold: int32p(10), UnhealthyThreshold: int32p(2), Timeout: secs(120), Interval: secs(5)}
		}},
	{Name: "health check tcp", In: map[string]string{annotations.AWSHealthCheckProtocol: "TCP", annotations.AWSHealthCheckPort: "65535"},
		Want: func(o *ServiceOptions) { o.HealthCheck = HealthCheckOptions{Protocol: "TCP", Port: "65535"} }},
	{Name: "health check every value bad", In: map[string]string{
		annotations.AWSHealthCheckProtocol: "udp", annotations.AWSHealthCheckPort: "0", annotations.AWSHealthCheckPath: "healthz",
		annotations.AWSHealthCheckHealthyThreshold: "1", annotations.AWSHealthCheckUnhealthyThreshold: "11",
		annotations.AWSHealthCheckTimeout: "121", annotations.AWSHealthCheckInterval: "4"},
		Errs: []wantErr{
			{Key: annotations.AWSHealthCheckHealthyThreshold, Bad: "1", Contains: "from 2 to 10"},
			{Key: annotations.AWSHealthCheckInterval, Bad: "4", Contains: "from 5 to 300"},
			{Key: annotations.AWSHealthCheckPath, Bad: "healthz", Contains: `starting with "/"`},
			{Key: annotations.AWSHealthCheckPort, Bad: "0", Contains: `"traffic-port" or a port number`},
			{Key: annotations.AWSHealthCheckProtocol, Bad: "udp", Contains: `"TCP", "HTTP", "HTTPS"`},
			{Key: annotations.AWSHealthCheckTimeout, Bad: "121", Contains: "from 2 to 120"},
			{Key: annotations.AWSHealthCheckUnhealthyThreshold, Bad: "11", Contains: "from 2 to 10"},
		}},
	{Name: "health check more bad values", In: map[string]string{
		annotations.AWSHealthCheckPort: "Traffic-Port", annotations.AWSHealthCheckPath: "/a b",
		annotations.AWSHealthCheckHealthyThreshold: "x", annotations.AWSHealthCheckTimeout: "1", annotations.AWSHealthCheckInterval: "301"},
		Errs: []wantErr{
			{Key: annotations.AWSHealthCheckHealthyThreshold, Bad: "x", Contains: "integer"},
			{Key: annotations.AWSHealthCheckInterval, Bad: "301", Contains: "from 5 to 300"},
			{Key: annotations.AWSHealthCheckPath, Bad: "/a b", Contains: "without whitespace"},
			{Key: annotations.AWSHealthCheckPort, Bad: "Traffic-Port", Contains: `"traffic-port"`},
			{Key: annotations.AWSHealthCheckTimeout, Bad: "1", Contains: "from 2 to 120"},
		}},
	{Name: "health check path too long", In: map[string]string{annotations.AWSHealthCheckPath: "/" + strings.Repeat("a", 1024), annotations.AWSHealthCheckPort: "65536"},
		Errs: []wantErr{{Key: annotations.AWSHealthCheckPath, Bad: "/" + strings.Repeat("a", 1024), Contains: "at most 1024"}, {Key: annotations.AWSHealthCheckPort, Bad: "65536", Contains: "1 to 65535"}}},

	// access logs
	{Name: "access log all set", In: map[string]string{annotations.AWSAccessLogEnabled: "true", annotations.AWSAccessLogEmitInterval: "5",
		annotations.AWSAccessLogS3BucketName: "my-logs.bucket", annotations.AWSAccessLogS3BucketPrefix: "clusters/a"},
		Want: func(o *ServiceOptions) {
			o.AccessLog = AccessLogOptions{Enabled: boolp(true), EmitInterval: int32p(5), Bucket: "my-logs.bucket", Prefix: "clusters/a"}
		}},
	{Name: "access log off, hourly", In: map[string]string{annotations.AWSAccessLogEnabled: "false", annotations.AWSAccessLogEmitInterval: "60"},
		Want: func(o *ServiceOptions) {
			o.AccessLog = AccessLogOptions{Enabled: boolp(false), EmitInterval: int32p(60)}
		}},
	{Name: "access log bad values", In: map[string]string{annotations.AWSAccessLogEnabled: "yes", annotations.AWSAccessLogEmitInterval: "10",
		annotations.AWSAccessLogS3BucketName: "My_Bucket", annotations.AWSAccessLogS3BucketPrefix: "/logs/"},
		Errs: []wantErr{
			{Key: annotations.AWSAccessLogEmitInterval, Bad: "10", Contains: "5 or 60"},
			{Key: annotations.AWSAccessLogEnabled, Bad: "yes", Contains: `"true" or "false"`},
			{Key: annotations.AWSAccessLogS3BucketName, Bad: "My_Bucket", Contains: "S3 bucket name"},
			{Key: annotations.AWSAccessLogS3BucketPrefix, Bad: "/logs/", Contains: "leading or trailing"},
		}},
	{Name: "access log bucket too short", In: map[string]string{annotations.AWSAccessLogS3BucketName: "ab"}, Errs: []wantErr{{Key: annotations.AWSAccessLogS3BucketName, Bad: "ab", Contains: "3-63"}}},

	// target-group attributes
	{Name: "target group attributes", In: map[string]string{annotations.AWSTargetGroupAttributes: "proxy_protocol_v2.enabled=true, deregistration_delay.timeout_seconds=30,preserve_client_ip.enabled=false,stickiness.type=source_ip"},
		Want: func(o *ServiceOptions) {
			o.TargetGroupAttributes = map[string]string{"proxy_protocol_v2.enabled": "true", "deregistration_delay.timeout_seconds": "30",
				"preserve_client_ip.enabled": "false", "stickiness.type": "source_ip"}
		}},
	{Name: "target group attributes unknown key and bad values", In: map[string]string{annotations.AWSTargetGroupAttributes: "proxy_protocol_v2.enabled=yes,deregistration_delay.timeout_seconds=4000,load_balancing.algorithm.type=lor"},
		Errs: []wantErr{
			{Key: annotations.AWSTargetGroupAttributes, Bad: "yes", Contains: "proxy_protocol_v2.enabled: must be"},
			{Key: annotations.AWSTargetGroupAttributes, Bad: "4000", Contains: "from 0 to 3600"},
			{Key: annotations.AWSTargetGroupAttributes, Bad: "load_balancing.algorithm.type", Contains: "unknown target-group attribute"},
		}},
	{Name: "target group attributes empty", In: map[string]string{annotations.AWSTargetGroupAttributes: ""}, Errs: []wantErr{{Key: annotations.AWSTargetGroupAttributes, Bad: "", Contains: "at least one"}}},

	// NLB addresses
	{Name: "eip allocations", In: map[string]string{annotations.AWSEIPAllocations: "eipalloc-0a1, eipalloc-0b2"},
		Want: func(o *ServiceOptions) { o.EIPAllocations = []string{"eipalloc-0a1", "eipalloc-0b2"} }},
	{Name: "eip allocations bad", In: map[string]string{annotations.AWSEIPAllocations: "eipalloc-0a1,198.18.0.1"},
		Errs: []wantErr{{Key: annotations.AWSEIPAllocations, Bad: "198.18.0.1", Contains: "allocation ID"}}},
	{Name: "private addresses", In: map[string]string{annotations.AWSPrivateIPv4Addresses: "198.18.11.10,198.18.12.10"},
		Want: func(o *ServiceOptions) { o.PrivateIPv4Addresses = addrList("198.18.11.10", "198.18.12.10") }},
	{Name: "private addresses v6 and duplicate", In: map[string]string{annotations.AWSPrivateIPv4Addresses: "2001:db8::1,198.18.11.10,198.18.11.10"},
		Errs: []wantErr{{Key: annotations.AWSPrivateIPv4Addresses, Bad: "198.18.11.10", Contains: "duplicate"}, {Key: annotations.AWSPrivateIPv4Addresses, Bad: "2001:db8::1", Contains: "IPv4 address"}}},

	// NLB target type, address type, ALPN, backend rules
	{Name: "nlb target type instance", In: map[string]string{annotations.AWSNLBTargetType: "instance"}, Want: func(o *ServiceOptions) { o.NLBTargetType = "instance" }},
	{Name: "nlb target type ip points to the LBC", In: map[string]string{annotations.AWSNLBTargetType: "ip"}, Errs: []wantErr{{Key: annotations.AWSNLBTargetType, Bad: "ip", Contains: "AWS Load Balancer Controller"}}},
	{Name: "nlb target type other", In: map[string]string{annotations.AWSNLBTargetType: "Instance"}, Errs: []wantErr{{Key: annotations.AWSNLBTargetType, Bad: "Instance", Contains: `must be "instance"`}}},
	{Name: "ip address type dualstack", In: map[string]string{annotations.AWSIPAddressType: "dualstack"}, Want: func(o *ServiceOptions) { o.IPAddressType = "dualstack" }},
	{Name: "ip address type ipv6", In: map[string]string{annotations.AWSIPAddressType: "ipv6"}, Errs: []wantErr{{Key: annotations.AWSIPAddressType, Bad: "ipv6", Contains: `"ipv4" or "dualstack"`}}},
	{Name: "manage backend rules off", In: map[string]string{annotations.AWSManageBackendSecurityGroupRules: "false"},
		Want: func(o *ServiceOptions) { o.ManageBackendSecurityGroupRules = boolp(false) }},
	{Name: "manage backend rules no", In: map[string]string{annotations.AWSManageBackendSecurityGroupRules: "no"},
		Errs: []wantErr{{Key: annotations.AWSManageBackendSecurityGroupRules, Bad: "no", Contains: `"true" or "false"`}}},
	{Name: "alpn policy", In: map[string]string{annotations.AWSALPNPolicy: "HTTP2Preferred"}, Want: func(o *ServiceOptions) { o.ALPNPolicy = "HTTP2Preferred" }},
	{Name: "alpn policy wrong case", In: map[string]string{annotations.AWSALPNPolicy: "http2preferred"}, Errs: []wantErr{{Key: annotations.AWSALPNPolicy, Bad: "http2preferred", Contains: "HTTP2Preferred"}}},

	// TLS policy, draining, security groups
	{Name: "ssl negotiation policy", In: map[string]string{annotations.AWSSSLNegotiationPolicy: "ELBSecurityPolicy-TLS13-1-2-2021-06"},
		Want: func(o *ServiceOptions) { o.SSLNegotiationPolicy = "ELBSecurityPolicy-TLS13-1-2-2021-06" }},
	{Name: "ssl negotiation policy bad", In: map[string]string{annotations.AWSSSLNegotiationPolicy: "my policy"}, Errs: []wantErr{{Key: annotations.AWSSSLNegotiationPolicy, Bad: "my policy", Contains: "predefined policy name"}}},
	{Name: "connection draining", In: map[string]string{annotations.AWSConnectionDrainingEnabled: "true", annotations.AWSConnectionDrainingTimeout: "60"},
		Want: func(o *ServiceOptions) { o.ConnectionDraining, o.ConnectionDrainingTimeout = boolp(true), secs(60) }},
	{Name: "connection draining bad", In: map[string]string{annotations.AWSConnectionDrainingEnabled: "on", annotations.AWSConnectionDrainingTimeout: "0"},
		Errs: []wantErr{{Key: annotations.AWSConnectionDrainingEnabled, Bad: "on", Contains: `"true" or "false"`}, {Key: annotations.AWSConnectionDrainingTimeout, Bad: "0", Contains: "from 1 to 3600"}}},
	{Name: "security groups", In: map[string]string{annotations.AWSSecurityGroups: "sg-0a1, sg-0b2", annotations.AWSExtraSecurityGroups: "sg-ff"},
		Want: func(o *ServiceOptions) {
			o.SecurityGroups, o.ExtraSecurityGroups = []string{"sg-0a1", "sg-0b2"}, []string{"sg-ff"}
		}},
	{Name: "security groups bad", In: map[string]string{annotations.AWSSecurityGroups: "web", annotations.AWSExtraSecurityGroups: ""},
		Errs: []wantErr{{Key: annotations.AWSExtraSecurityGroups, Bad: "", Contains: "at least one"}, {Key: annotations.AWSSecurityGroups, Bad: "web", Contains: "security group ID"}}},
}

var optionsTable = annotationstest.Table[ServiceOptions]{Parse: ParseServiceOptions, Cases: optionsCases}

func TestParseServiceOptions(t *testing.T) { optionsTable.Run(t) }

// TestOptionRulesCoverKeys: the rules read exactly the aws keys annotations.Keys declares except
// the internal and scheme keys, which annotations.Parse reads into the common Internal, and each
// has cases.
func TestOptionRulesCoverKeys(t *testing.T) {
	providertest.CheckOptionRules(t, optionsTable, optionRules, "aws", annotations.AWSLoadBalancerInternal, annotations.AWSLoadBalancerScheme)
}
