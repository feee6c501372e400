package aws

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
)

// wantErr is one expected error: on key, with bad value bad, and a detail containing contains.
type wantErr struct {
	key      string
	bad      any
	contains string
}

// checkErrs compares errs with want, in order.
func checkErrs(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, e := range errs {
		w := want[i]
		wantField := field.NewPath("metadata", "annotations").Key(w.key).String()
		if e.Type != field.ErrorTypeInvalid || e.Field != wantField || !reflect.DeepEqual(e.BadValue, w.bad) || !strings.Contains(e.Detail, w.contains) {
			t.Errorf("error %d: got %v (type %s, field %s, value %#v)\nwant field %s, value %#v, detail containing %q",
				i, e, e.Type, e.Field, e.BadValue, wantField, w.bad, w.contains)
		}
	}
}

// checkEveryKeyHasCases makes adding a key without tests fail: every canonical key of keys needs
// a valid and an invalid case, every alias a valid case.
func checkEveryKeyHasCases(t *testing.T, keys []string, cases []map[string]string, errs [][]wantErr) {
	valid, invalid := map[string]bool{}, map[string]bool{}
	for i, in := range cases {
		bad := map[string]bool{}
		for _, e := range errs[i] {
			bad[e.key] = true
			invalid[e.key] = true
		}
		for k := range in {
			if !bad[k] {
				valid[k] = true
			}
		}
	}
	for _, k := range annotations.Keys {
		if !slices.Contains(keys, k.Name) {
			continue
		}
		if !valid[k.Name] || !invalid[k.Name] {
			t.Errorf("%s: need a valid and an invalid case (valid %t, invalid %t)", k.Name, valid[k.Name], invalid[k.Name])
		}
		for _, a := range k.Aliases {
			if !valid[a] {
				t.Errorf("%s: alias of %s needs a valid case", a, k.Name)
			}
		}
	}
}

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

type optionsCase struct {
	name string
	in   map[string]string
	// want edits the zero options into the expected ones; nil: unchanged.
	want func(o *ServiceOptions)
	errs []wantErr
}

var optionsCases = []optionsCase{
	// several problems at once, sorted by key; other sections' keys are not read
	{name: "every problem reported in key order", in: map[string]string{
		annotations.Internal: "yes", annotations.AWSLoadBalancerType: "external", annotations.AddressPool: "UPPER",
		annotations.AWSHealthCheckInterval: "1", annotations.AWSSubnets: "subnet-1"},
		want: func(o *ServiceOptions) { o.Subnets = []string{"subnet-1"} },
		errs: []wantErr{
			{annotations.AWSHealthCheckInterval, "1", "from 5 to 300"},
			{annotations.AWSLoadBalancerType, "external", "AWS Load Balancer Controller"},
		}},

	// aws-load-balancer-type
	{name: "type nlb", in: map[string]string{annotations.AWSLoadBalancerType: "nlb"}, want: func(o *ServiceOptions) { o.Kind = NLB }},
	{name: "type external belongs to the LBC", in: map[string]string{annotations.AWSLoadBalancerType: "external"},
		errs: []wantErr{{annotations.AWSLoadBalancerType, "external", "AWS Load Balancer Controller"}}},
	{name: "type nlb-ip belongs to the LBC", in: map[string]string{annotations.AWSLoadBalancerType: "nlb-ip"},
		errs: []wantErr{{annotations.AWSLoadBalancerType, "nlb-ip", "AWS Load Balancer Controller"}}},
	{name: "type NLB is case-sensitive", in: map[string]string{annotations.AWSLoadBalancerType: "NLB"}, errs: []wantErr{{annotations.AWSLoadBalancerType, "NLB", `must be "nlb"`}}},
	{name: "type classic is not a value", in: map[string]string{annotations.AWSLoadBalancerType: "classic"}, errs: []wantErr{{annotations.AWSLoadBalancerType, "classic", `must be "nlb"`}}},
	{name: "type empty", in: map[string]string{annotations.AWSLoadBalancerType: ""}, errs: []wantErr{{annotations.AWSLoadBalancerType, "", `must be "nlb"`}}},

	// aws-load-balancer-cross-zone-load-balancing-enabled
	{name: "cross zone true", in: map[string]string{annotations.AWSCrossZoneLoadBalancing: "true"}, want: func(o *ServiceOptions) { o.CrossZone = boolp(true) }},
	{name: "cross zone false is not unset", in: map[string]string{annotations.AWSCrossZoneLoadBalancing: "false"}, want: func(o *ServiceOptions) { o.CrossZone = boolp(false) }},
	{name: "cross zone yes", in: map[string]string{annotations.AWSCrossZoneLoadBalancing: "yes"}, errs: []wantErr{{annotations.AWSCrossZoneLoadBalancing, "yes", `"true" or "false"`}}},
	{name: "cross zone 1", in: map[string]string{annotations.AWSCrossZoneLoadBalancing: "1"}, errs: []wantErr{{annotations.AWSCrossZoneLoadBalancing, "1", `"true" or "false"`}}},

	// aws-load-balancer-additional-resource-tags
	{name: "tags", in: map[string]string{annotations.AWSAdditionalResourceTags: "team=web, env = prod,keyonly,eq=a=b"},
		want: func(o *ServiceOptions) {
			o.AdditionalTags = map[string]string{"team": "web", "env": "prod", "keyonly": "", "eq": "a=b"}
		}},
	{name: "tags at the limits", in: map[string]string{annotations.AWSAdditionalResourceTags: strings.Repeat("k", 128) + "=" + strings.Repeat("é", 256)},
		want: func(o *ServiceOptions) {
			o.AdditionalTags = map[string]string{strings.Repeat("k", 128): strings.Repeat("é", 256)}
		}},
	{name: "tags empty key", in: map[string]string{annotations.AWSAdditionalResourceTags: "a=1,=v"},
		errs: []wantErr{{annotations.AWSAdditionalResourceTags, "=v", "tag key must not be empty"}}},
	{name: "tags too long", in: map[string]string{annotations.AWSAdditionalResourceTags: strings.Repeat("k", 129) + "=v,k=" + strings.Repeat("v", 257)},
		errs: []wantErr{{annotations.AWSAdditionalResourceTags, strings.Repeat("k", 129), "at most 128"}, {annotations.AWSAdditionalResourceTags, strings.Repeat("v", 257), "at most 256"}}},
	{name: "tags reserved prefix", in: map[string]string{annotations.AWSAdditionalResourceTags: "AWS:foo=bar"},
		errs: []wantErr{{annotations.AWSAdditionalResourceTags, "AWS:foo", "reserved"}}},
	{name: "tags duplicate key", in: map[string]string{annotations.AWSAdditionalResourceTags: "a=1, a=2"},
		errs: []wantErr{{annotations.AWSAdditionalResourceTags, "a=2", "duplicate key"}}},
	{name: "tags empty item", in: map[string]string{annotations.AWSAdditionalResourceTags: "a=1,,b"},
		errs: []wantErr{{annotations.AWSAdditionalResourceTags, "a=1,,b", "empty item"}}},

	// aws-load-balancer-subnets
	{name: "subnets", in: map[string]string{annotations.AWSSubnets: "subnet-0abc, my-public-subnet"},
		want: func(o *ServiceOptions) { o.Subnets = []string{"subnet-0abc", "my-public-subnet"} }},
	{name: "subnets duplicate", in: map[string]string{annotations.AWSSubnets: "subnet-1,subnet-1"},
		errs: []wantErr{{annotations.AWSSubnets, "subnet-1", "duplicate subnet"}}},
	{name: "subnets trailing comma", in: map[string]string{annotations.AWSSubnets: "subnet-1,"},
		errs: []wantErr{{annotations.AWSSubnets, "subnet-1,", "empty item"}}},

	// aws-load-balancer-target-node-labels
	{name: "target node labels", in: map[string]string{annotations.AWSTargetNodeLabels: "node-role=lb, zone=,kubernetes.io/os=linux,ready"},
		want: func(o *ServiceOptions) {
			o.TargetNodeLabels = map[string]string{"node-role": "lb", "zone": "", "kubernetes.io/os": "linux", "ready": ""}
		}},
	{name: "target node labels bad key and value", in: map[string]string{annotations.AWSTargetNodeLabels: "bad key=x,k=bad value"},
		errs: []wantErr{{annotations.AWSTargetNodeLabels, "bad key", "invalid label key"}, {annotations.AWSTargetNodeLabels, "bad value", "invalid label value"}}},
	{name: "target node labels duplicate", in: map[string]string{annotations.AWSTargetNodeLabels: "k=1,k=2"},
		errs: []wantErr{{annotations.AWSTargetNodeLabels, "k=2", "duplicate key"}}},

	// aws-load-balancer-connection-idle-timeout
	{name: "idle timeout min", in: map[string]string{annotations.AWSConnectionIdleTimeout: "1"}, want: func(o *ServiceOptions) { o.ConnectionIdleTimeout = secs(1) }},
	{name: "idle timeout max", in: map[string]string{annotations.AWSConnectionIdleTimeout: "4000"}, want: func(o *ServiceOptions) { o.ConnectionIdleTimeout = secs(4000) }},
	{name: "idle timeout zero", in: map[string]string{annotations.AWSConnectionIdleTimeout: "0"}, errs: []wantErr{{annotations.AWSConnectionIdleTimeout, "0", "from 1 to 4000"}}},
	{name: "idle timeout too big", in: map[string]string{annotations.AWSConnectionIdleTimeout: "4001"}, errs: []wantErr{{annotations.AWSConnectionIdleTimeout, "4001", "from 1 to 4000"}}},
	{name: "idle timeout with unit", in: map[string]string{annotations.AWSConnectionIdleTimeout: "60s"}, errs: []wantErr{{annotations.AWSConnectionIdleTimeout, "60s", "integer number of seconds"}}},

	// aws-load-balancer-proxy-protocol
	{name: "proxy protocol", in: map[string]string{annotations.AWSProxyProtocol: "*"}, want: func(o *ServiceOptions) { o.ProxyProtocol = true }},
	{name: "proxy protocol true", in: map[string]string{annotations.AWSProxyProtocol: "true"}, errs: []wantErr{{annotations.AWSProxyProtocol, "true", `must be "*"`}}},
	{name: "proxy protocol empty", in: map[string]string{annotations.AWSProxyProtocol: ""}, errs: []wantErr{{annotations.AWSProxyProtocol, "", `must be "*"`}}},

	// aws-load-balancer-ssl-cert
	{name: "ssl cert ACM", in: map[string]string{annotations.AWSSSLCert: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b"},
		want: func(o *ServiceOptions) { o.SSLCert = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b" }},
	{name: "ssl cert IAM", in: map[string]string{annotations.AWSSSLCert: "arn:aws-cn:iam::123456789012:server-certificate/web"},
		want: func(o *ServiceOptions) { o.SSLCert = "arn:aws-cn:iam::123456789012:server-certificate/web" }},
	{name: "ssl cert name", in: map[string]string{annotations.AWSSSLCert: "my-cert"}, errs: []wantErr{{annotations.AWSSSLCert, "my-cert", "certificate ARN"}}},
	{name: "ssl cert other service", in: map[string]string{annotations.AWSSSLCert: "arn:aws:s3:::bucket"}, errs: []wantErr{{annotations.AWSSSLCert, "arn:aws:s3:::bucket", "certificate ARN"}}},
	{name: "ssl cert with space", in: map[string]string{annotations.AWSSSLCert: "arn:aws:acm:us-east-1:1:certificate/a b"},
		errs: []wantErr{{annotations.AWSSSLCert, "arn:aws:acm:us-east-1:1:certificate/a b", "certificate ARN"}}},
	{name: "ssl cert empty", in: map[string]string{annotations.AWSSSLCert: ""}, errs: []wantErr{{annotations.AWSSSLCert, "", "certificate ARN"}}},

	// aws-load-balancer-ssl-ports
	{name: "ssl ports star", in: map[string]string{annotations.AWSSSLPorts: "*"}, want: func(o *ServiceOptions) { o.SSLPorts = []string{"*"} }},
	{name: "ssl ports numbers and names", in: map[string]string{annotations.AWSSSLPorts: "443, https,08443"},
		want: func(o *ServiceOptions) { o.SSLPorts = []string{"443", "https", "8443"} }},
	{name: "ssl ports star combined", in: map[string]string{annotations.AWSSSLPorts: "*,443"}, errs: []wantErr{{annotations.AWSSSLPorts, "*,443", "cannot be combined"}}},
	{name: "ssl ports bad items", in: map[string]string{annotations.AWSSSLPorts: "70000,HTTPS,443,0443"},
		errs: []wantErr{{annotations.AWSSSLPorts, "0443", "duplicate port"}, {annotations.AWSSSLPorts, "70000", "out of range"}, {annotations.AWSSSLPorts, "HTTPS", "not a port number or port name"}}},
	{name: "ssl ports empty", in: map[string]string{annotations.AWSSSLPorts: ""}, errs: []wantErr{{annotations.AWSSSLPorts, "", "must not be empty"}}},

	// aws-load-balancer-backend-protocol
	{name: "backend protocol", in: map[string]string{annotations.AWSBackendProtocol: "HTTP"}, want: func(o *ServiceOptions) { o.BackendProtocol = "http" }},
	{name: "backend protocol ssl", in: map[string]string{annotations.AWSBackendProtocol: "ssl"}, want: func(o *ServiceOptions) { o.BackendProtocol = "ssl" }},
	{name: "backend protocol udp", in: map[string]string{annotations.AWSBackendProtocol: "udp"}, errs: []wantErr{{annotations.AWSBackendProtocol, "udp", `"http", "https", "ssl", "tcp"`}}},

	// health checks
	{name: "health check all set", in: map[string]string{
		annotations.AWSHealthCheckProtocol: "http", annotations.AWSHealthCheckPort: "8080", annotations.AWSHealthCheckPath: "/healthz",
		annotations.AWSHealthCheckHealthyThreshold: "2", annotations.AWSHealthCheckUnhealthyThreshold: "10",
		annotations.AWSHealthCheckTimeout: "2", annotations.AWSHealthCheckInterval: "300"},
		want: func(o *ServiceOptions) {
			o.HealthCheck = HealthCheckOptions{Protocol: "HTTP", Port: "8080", Path: "/healthz",
				HealthyThreshold: int32p(2), UnhealthyThreshold: int32p(10), Timeout: secs(2), Interval: secs(300)}
		}},
	{name: "health check other bounds", in: map[string]string{
		annotations.AWSHealthCheckProtocol: "Https", annotations.AWSHealthCheckPort: "traffic-port", annotations.AWSHealthCheckHealthyThreshold: "10",
		annotations.AWSHealthCheckUnhealthyThreshold: "2", annotations.AWSHealthCheckTimeout: "120", annotations.AWSHealthCheckInterval: "5"},
		want: func(o *ServiceOptions) {
			o.HealthCheck = HealthCheckOptions{Protocol: "HTTPS", Port: "traffic-port",
				HealthyThreshold: int32p(10), UnhealthyThreshold: int32p(2), Timeout: secs(120), Interval: secs(5)}
		}},
	{name: "health check tcp", in: map[string]string{annotations.AWSHealthCheckProtocol: "TCP", annotations.AWSHealthCheckPort: "65535"},
		want: func(o *ServiceOptions) { o.HealthCheck = HealthCheckOptions{Protocol: "TCP", Port: "65535"} }},
	{name: "health check every value bad", in: map[string]string{
		annotations.AWSHealthCheckProtocol: "udp", annotations.AWSHealthCheckPort: "0", annotations.AWSHealthCheckPath: "healthz",
		annotations.AWSHealthCheckHealthyThreshold: "1", annotations.AWSHealthCheckUnhealthyThreshold: "11",
		annotations.AWSHealthCheckTimeout: "121", annotations.AWSHealthCheckInterval: "4"},
		errs: []wantErr{
			{annotations.AWSHealthCheckHealthyThreshold, "1", "from 2 to 10"},
			{annotations.AWSHealthCheckInterval, "4", "from 5 to 300"},
			{annotations.AWSHealthCheckPath, "healthz", `starting with "/"`},
			{annotations.AWSHealthCheckPort, "0", `"traffic-port" or a port number`},
			{annotations.AWSHealthCheckProtocol, "udp", `"TCP", "HTTP", "HTTPS"`},
			{annotations.AWSHealthCheckTimeout, "121", "from 2 to 120"},
			{annotations.AWSHealthCheckUnhealthyThreshold, "11", "from 2 to 10"},
		}},
	{name: "health check more bad values", in: map[string]string{
		annotations.AWSHealthCheckPort: "Traffic-Port", annotations.AWSHealthCheckPath: "/a b",
		annotations.AWSHealthCheckHealthyThreshold: "x", annotations.AWSHealthCheckTimeout: "1", annotations.AWSHealthCheckInterval: "301"},
		errs: []wantErr{
			{annotations.AWSHealthCheckHealthyThreshold, "x", "integer"},
			{annotations.AWSHealthCheckInterval, "301", "from 5 to 300"},
			{annotations.AWSHealthCheckPath, "/a b", "without whitespace"},
			{annotations.AWSHealthCheckPort, "Traffic-Port", `"traffic-port"`},
			{annotations.AWSHealthCheckTimeout, "1", "from 2 to 120"},
		}},
	{name: "health check path too long", in: map[string]string{annotations.AWSHealthCheckPath: "/" + strings.Repeat("a", 1024), annotations.AWSHealthCheckPort: "65536"},
		errs: []wantErr{{annotations.AWSHealthCheckPath, "/" + strings.Repeat("a", 1024), "at most 1024"}, {annotations.AWSHealthCheckPort, "65536", "1 to 65535"}}},

	// access logs
	{name: "access log all set", in: map[string]string{annotations.AWSAccessLogEnabled: "true", annotations.AWSAccessLogEmitInterval: "5",
		annotations.AWSAccessLogS3BucketName: "my-logs.bucket", annotations.AWSAccessLogS3BucketPrefix: "clusters/a"},
		want: func(o *ServiceOptions) {
			o.AccessLog = AccessLogOptions{Enabled: boolp(true), EmitInterval: int32p(5), Bucket: "my-logs.bucket", Prefix: "clusters/a"}
		}},
	{name: "access log off, hourly", in: map[string]string{annotations.AWSAccessLogEnabled: "false", annotations.AWSAccessLogEmitInterval: "60"},
		want: func(o *ServiceOptions) {
			o.AccessLog = AccessLogOptions{Enabled: boolp(false), EmitInterval: int32p(60)}
		}},
	{name: "access log bad values", in: map[string]string{annotations.AWSAccessLogEnabled: "yes", annotations.AWSAccessLogEmitInterval: "10",
		annotations.AWSAccessLogS3BucketName: "My_Bucket", annotations.AWSAccessLogS3BucketPrefix: "/logs/"},
		errs: []wantErr{
			{annotations.AWSAccessLogEmitInterval, "10", "5 or 60"},
			{annotations.AWSAccessLogEnabled, "yes", `"true" or "false"`},
			{annotations.AWSAccessLogS3BucketName, "My_Bucket", "S3 bucket name"},
			{annotations.AWSAccessLogS3BucketPrefix, "/logs/", "leading or trailing"},
		}},
	{name: "access log bucket too short", in: map[string]string{annotations.AWSAccessLogS3BucketName: "ab"}, errs: []wantErr{{annotations.AWSAccessLogS3BucketName, "ab", "3-63"}}},

	// target-group attributes
	{name: "target group attributes", in: map[string]string{annotations.AWSTargetGroupAttributes: "proxy_protocol_v2.enabled=true, deregistration_delay.timeout_seconds=30,preserve_client_ip.enabled=false,stickiness.type=source_ip"},
		want: func(o *ServiceOptions) {
			o.TargetGroupAttributes = map[string]string{"proxy_protocol_v2.enabled": "true", "deregistration_delay.timeout_seconds": "30",
				"preserve_client_ip.enabled": "false", "stickiness.type": "source_ip"}
		}},
	{name: "target group attributes unknown key and bad values", in: map[string]string{annotations.AWSTargetGroupAttributes: "proxy_protocol_v2.enabled=yes,deregistration_delay.timeout_seconds=4000,load_balancing.algorithm.type=lor"},
		errs: []wantErr{
			{annotations.AWSTargetGroupAttributes, "yes", "proxy_protocol_v2.enabled: must be"},
			{annotations.AWSTargetGroupAttributes, "4000", "from 0 to 3600"},
			{annotations.AWSTargetGroupAttributes, "load_balancing.algorithm.type", "unknown target-group attribute"},
		}},
	{name: "target group attributes empty", in: map[string]string{annotations.AWSTargetGroupAttributes: ""}, errs: []wantErr{{annotations.AWSTargetGroupAttributes, "", "at least one"}}},

	// NLB addresses
	{name: "eip allocations", in: map[string]string{annotations.AWSEIPAllocations: "eipalloc-0a1, eipalloc-0b2"},
		want: func(o *ServiceOptions) { o.EIPAllocations = []string{"eipalloc-0a1", "eipalloc-0b2"} }},
	{name: "eip allocations bad", in: map[string]string{annotations.AWSEIPAllocations: "eipalloc-0a1,198.18.0.1"},
		errs: []wantErr{{annotations.AWSEIPAllocations, "198.18.0.1", "allocation ID"}}},
	{name: "private addresses", in: map[string]string{annotations.AWSPrivateIPv4Addresses: "198.18.11.10,198.18.12.10"},
		want: func(o *ServiceOptions) { o.PrivateIPv4Addresses = addrList("198.18.11.10", "198.18.12.10") }},
	{name: "private addresses v6 and duplicate", in: map[string]string{annotations.AWSPrivateIPv4Addresses: "2001:db8::1,198.18.11.10,198.18.11.10"},
		errs: []wantErr{{annotations.AWSPrivateIPv4Addresses, "198.18.11.10", "duplicate"}, {annotations.AWSPrivateIPv4Addresses, "2001:db8::1", "IPv4 address"}}},

	// NLB target type, address type, ALPN, backend rules
	{name: "nlb target type instance", in: map[string]string{annotations.AWSNLBTargetType: "instance"}, want: func(o *ServiceOptions) { o.NLBTargetType = "instance" }},
	{name: "nlb target type ip points to the LBC", in: map[string]string{annotations.AWSNLBTargetType: "ip"}, errs: []wantErr{{annotations.AWSNLBTargetType, "ip", "AWS Load Balancer Controller"}}},
	{name: "nlb target type other", in: map[string]string{annotations.AWSNLBTargetType: "Instance"}, errs: []wantErr{{annotations.AWSNLBTargetType, "Instance", `must be "instance"`}}},
	{name: "ip address type dualstack", in: map[string]string{annotations.AWSIPAddressType: "dualstack"}, want: func(o *ServiceOptions) { o.IPAddressType = "dualstack" }},
	{name: "ip address type ipv6", in: map[string]string{annotations.AWSIPAddressType: "ipv6"}, errs: []wantErr{{annotations.AWSIPAddressType, "ipv6", `"ipv4" or "dualstack"`}}},
	{name: "manage backend rules off", in: map[string]string{annotations.AWSManageBackendSecurityGroupRules: "false"},
		want: func(o *ServiceOptions) { o.ManageBackendSecurityGroupRules = boolp(false) }},
	{name: "manage backend rules no", in: map[string]string{annotations.AWSManageBackendSecurityGroupRules: "no"},
		errs: []wantErr{{annotations.AWSManageBackendSecurityGroupRules, "no", `"true" or "false"`}}},
	{name: "alpn policy", in: map[string]string{annotations.AWSALPNPolicy: "HTTP2Preferred"}, want: func(o *ServiceOptions) { o.ALPNPolicy = "HTTP2Preferred" }},
	{name: "alpn policy wrong case", in: map[string]string{annotations.AWSALPNPolicy: "http2preferred"}, errs: []wantErr{{annotations.AWSALPNPolicy, "http2preferred", "HTTP2Preferred"}}},

	// TLS policy, draining, security groups
	{name: "ssl negotiation policy", in: map[string]string{annotations.AWSSSLNegotiationPolicy: "ELBSecurityPolicy-TLS13-1-2-2021-06"},
		want: func(o *ServiceOptions) { o.SSLNegotiationPolicy = "ELBSecurityPolicy-TLS13-1-2-2021-06" }},
	{name: "ssl negotiation policy bad", in: map[string]string{annotations.AWSSSLNegotiationPolicy: "my policy"}, errs: []wantErr{{annotations.AWSSSLNegotiationPolicy, "my policy", "predefined policy name"}}},
	{name: "connection draining", in: map[string]string{annotations.AWSConnectionDrainingEnabled: "true", annotations.AWSConnectionDrainingTimeout: "60"},
		want: func(o *ServiceOptions) { o.ConnectionDraining, o.ConnectionDrainingTimeout = boolp(true), secs(60) }},
	{name: "connection draining bad", in: map[string]string{annotations.AWSConnectionDrainingEnabled: "on", annotations.AWSConnectionDrainingTimeout: "0"},
		errs: []wantErr{{annotations.AWSConnectionDrainingEnabled, "on", `"true" or "false"`}, {annotations.AWSConnectionDrainingTimeout, "0", "from 1 to 3600"}}},
	{name: "security groups", in: map[string]string{annotations.AWSSecurityGroups: "sg-0a1, sg-0b2", annotations.AWSExtraSecurityGroups: "sg-ff"},
		want: func(o *ServiceOptions) {
			o.SecurityGroups, o.ExtraSecurityGroups = []string{"sg-0a1", "sg-0b2"}, []string{"sg-ff"}
		}},
	{name: "security groups bad", in: map[string]string{annotations.AWSSecurityGroups: "web", annotations.AWSExtraSecurityGroups: ""},
		errs: []wantErr{{annotations.AWSExtraSecurityGroups, "", "at least one"}, {annotations.AWSSecurityGroups, "web", "security group ID"}}},
}

func TestParseServiceOptions(t *testing.T) {
	for _, tc := range optionsCases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseServiceOptions(tc.in)
			var want ServiceOptions
			if tc.want != nil {
				tc.want(&want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("options:\n got %+v\nwant %+v", got, want)
			}
			checkErrs(t, errs, tc.errs)
		})
	}
}

// TestOptionRulesCoverKeys: the rules read exactly the aws keys annotations.Keys declares except the internal and scheme keys, which annotations.Parse reads into the common Internal.
func TestOptionRulesCoverKeys(t *testing.T) {
	var declared, ruled []string
	for _, k := range annotations.Keys {
		if k.Provider == "aws" && k.Name != annotations.AWSLoadBalancerInternal && k.Name != annotations.AWSLoadBalancerScheme {
			declared = append(declared, k.Name)
		}
	}
	for _, r := range optionRules {
		ruled = append(ruled, r.Key)
	}
	if !slices.Equal(declared, ruled) {
		t.Errorf("rules read %v, annotations.Keys declares %v", ruled, declared)
	}
}

func TestEveryOptionKeyHasCases(t *testing.T) {
	var keys []string
	for _, r := range optionRules {
		keys = append(keys, r.Key)
	}
	var ins []map[string]string
	var errs [][]wantErr
	for _, tc := range optionsCases {
		ins, errs = append(ins, tc.in), append(errs, tc.errs)
	}
	checkEveryKeyHasCases(t, keys, ins, errs)
}
