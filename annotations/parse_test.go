package annotations

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func boolp(b bool) *bool        { return &b }
func int32p(n int32) *int32     { return &n }
func secs(n int) *time.Duration { d := time.Duration(n) * time.Second; return &d }
func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}
func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// wantErr is one expected error: on key, with bad value bad, and a detail containing contains.
type wantErr struct {
	key      string
	bad      any
	contains string
}

type parseCase struct {
	name string
	in   map[string]string
	// want edits the spec of empty annotations into the expected spec; nil: unchanged.
	want func(s *Spec)
	errs []wantErr
}

var parseCases = []parseCase{
	{name: "nil map"},
	{name: "empty map", in: map[string]string{}},

	// portico-lb.io/internal
	{name: "internal true", in: map[string]string{Internal: "true"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal false", in: map[string]string{Internal: "false"}},
	{name: "internal surrounding whitespace", in: map[string]string{Internal: " true\n"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal yes is an error", in: map[string]string{Internal: "yes"}, errs: []wantErr{{Internal, "yes", `"true" or "false"`}}},
	{name: "internal True is an error", in: map[string]string{Internal: "True"}, errs: []wantErr{{Internal, "True", `"true" or "false"`}}},
	{name: "internal empty is an error", in: map[string]string{Internal: ""}, errs: []wantErr{{Internal, "", `"true" or "false"`}}},

	// load-balancer-source-ranges
	{name: "source ranges v4 and v6 with spaces", in: map[string]string{SourceRanges: "10.0.0.0/8, 2001:db8::/32 ,198.19.0.1/32"},
		want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8", "2001:db8::/32", "198.19.0.1/32") }},
	{name: "source range host bits are masked", in: map[string]string{SourceRanges: "10.1.2.3/8"},
		want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8") }},
	{name: "source ranges empty value", in: map[string]string{SourceRanges: ""}},
	{name: "source range bare IPv4", in: map[string]string{SourceRanges: "10.0.0.1"}, errs: []wantErr{{SourceRanges, "10.0.0.1", "10.0.0.1/32"}}},
	{name: "source range bare IPv6", in: map[string]string{SourceRanges: "2001:db8::1"}, errs: []wantErr{{SourceRanges, "2001:db8::1", "2001:db8::1/128"}}},
	{name: "source ranges every bad item reported", in: map[string]string{SourceRanges: "10.0.0.0/8,bogus,10.0.0.0/33"},
		errs: []wantErr{{SourceRanges, "bogus", "not a CIDR"}, {SourceRanges, "10.0.0.0/33", "not a CIDR"}}},
	{name: "source ranges empty item", in: map[string]string{SourceRanges: "10.0.0.0/8,,10.1.0.0/16"},
		errs: []wantErr{{SourceRanges, "10.0.0.0/8,,10.1.0.0/16", "empty item"}}},
	{name: "source ranges trailing comma", in: map[string]string{SourceRanges: "10.0.0.0/8,"},
		errs: []wantErr{{SourceRanges, "10.0.0.0/8,", "empty item"}}},
	{name: "source ranges duplicate after masking", in: map[string]string{SourceRanges: "10.0.0.0/8, 10.9.9.9/8"},
		errs: []wantErr{{SourceRanges, "10.9.9.9/8", "duplicate CIDR"}}},

	// portico-lb.io/loadBalancerIPs and aliases
	{name: "lb IPs dual stack", in: map[string]string{LoadBalancerIPs: "198.18.128.10, 2001:db8::10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{name: "lb IPs empty value", in: map[string]string{LoadBalancerIPs: ""}},
	{name: "lb IPs CIDR is not an address", in: map[string]string{LoadBalancerIPs: "198.18.128.0/24"},
		errs: []wantErr{{LoadBalancerIPs, "198.18.128.0/24", "a CIDR is not an address"}}},
	{name: "lb IPs garbage", in: map[string]string{LoadBalancerIPs: "198.18.128.10,nope"},
		errs: []wantErr{{LoadBalancerIPs, "nope", "not an IP address"}}},
	{name: "lb IPs zone", in: map[string]string{LoadBalancerIPs: "fe80::1%eth0"},
		errs: []wantErr{{LoadBalancerIPs, "fe80::1%eth0", "zone"}}},
	{name: "lb IPs v4-mapped", in: map[string]string{LoadBalancerIPs: "::ffff:198.18.128.1"},
		errs: []wantErr{{LoadBalancerIPs, "::ffff:198.18.128.1", "write 198.18.128.1"}}},
	{name: "lb IPs duplicate", in: map[string]string{LoadBalancerIPs: "2001:db8::10,2001:DB8:0::10"},
		errs: []wantErr{{LoadBalancerIPs, "2001:DB8:0::10", "duplicate address"}}},
	{name: "lb IPs MetalLB alias", in: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") }},
	{name: "lb IPs legacy MetalLB alias", in: map[string]string{MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.11") }},
	{name: "lb IPs kube-vip alias", in: map[string]string{KubeVIPLoadBalancerIPs: "198.18.128.12"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.12") }},
	{name: "lb IPs key and aliases agree", in: map[string]string{
		LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "198.18.128.10, 2001:db8::10", KubeVIPLoadBalancerIPs: " 198.18.128.10 ,2001:db8:0::10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{name: "lb IPs alias conflicts", in: map[string]string{LoadBalancerIPs: "198.18.128.10", KubeVIPLoadBalancerIPs: "198.18.128.99"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{KubeVIPLoadBalancerIPs, "198.18.128.99", "conflicts with portico-lb.io/loadBalancerIPs"}}},
	{name: "lb IPs aliases conflict with each other", in: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10", MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{MetalLBLegacyLoadBalancerIPs, "198.18.128.11", "conflicts with metallb.io/loadBalancerIPs"}}},
	{name: "lb IPs order matters", in: map[string]string{LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "2001:db8::10,198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") },
		errs: []wantErr{{MetalLBLoadBalancerIPs, "2001:db8::10,198.18.128.10", "conflicts with"}}},
	{name: "lb IPs invalid key, valid alias is used", in: map[string]string{LoadBalancerIPs: "bad", MetalLBLoadBalancerIPs: "198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{LoadBalancerIPs, "bad", "not an IP address"}}},

	// aws-load-balancer-internal
	{name: "aws internal true", in: map[string]string{AWSLoadBalancerInternal: "true"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal CIDR means internal", in: map[string]string{AWSLoadBalancerInternal: "0.0.0.0/0"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal yes means internal", in: map[string]string{AWSLoadBalancerInternal: "yes"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal False means internal", in: map[string]string{AWSLoadBalancerInternal: "False"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal false", in: map[string]string{AWSLoadBalancerInternal: "false"}},
	{name: "aws internal empty", in: map[string]string{AWSLoadBalancerInternal: ""}},
	{name: "internal keys agree", in: map[string]string{Internal: "true", AWSLoadBalancerInternal: "yes"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal keys agree on false", in: map[string]string{Internal: "false", AWSLoadBalancerInternal: ""}},
	{name: "internal keys disagree", in: map[string]string{Internal: "true", AWSLoadBalancerInternal: "false"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{AWSLoadBalancerInternal, "false", "conflicts with portico-lb.io/internal"}}},
	{name: "internal keys disagree the other way", in: map[string]string{Internal: "false", AWSLoadBalancerInternal: "0.0.0.0/0"},
		errs: []wantErr{{AWSLoadBalancerInternal, "0.0.0.0/0", "conflicts with portico-lb.io/internal"}}},
	{name: "invalid portico internal does not conflict", in: map[string]string{Internal: "yes", AWSLoadBalancerInternal: "true"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{Internal, "yes", `"true" or "false"`}}},

	// aws-load-balancer-type
	{name: "type nlb", in: map[string]string{AWSLoadBalancerType: "nlb"}, want: func(s *Spec) { s.AWS.Type = AWSNLB }},
	{name: "type external belongs to the LBC", in: map[string]string{AWSLoadBalancerType: "external"},
		errs: []wantErr{{AWSLoadBalancerType, "external", "AWS Load Balancer Controller"}}},
	{name: "type nlb-ip belongs to the LBC", in: map[string]string{AWSLoadBalancerType: "nlb-ip"},
		errs: []wantErr{{AWSLoadBalancerType, "nlb-ip", "AWS Load Balancer Controller"}}},
	{name: "type NLB is case-sensitive", in: map[string]string{AWSLoadBalancerType: "NLB"}, errs: []wantErr{{AWSLoadBalancerType, "NLB", `must be "nlb"`}}},
	{name: "type classic is not a value", in: map[string]string{AWSLoadBalancerType: "classic"}, errs: []wantErr{{AWSLoadBalancerType, "classic", `must be "nlb"`}}},
	{name: "type empty", in: map[string]string{AWSLoadBalancerType: ""}, errs: []wantErr{{AWSLoadBalancerType, "", `must be "nlb"`}}},

	// aws-load-balancer-cross-zone-load-balancing-enabled
	{name: "cross zone true", in: map[string]string{AWSCrossZoneLoadBalancing: "true"}, want: func(s *Spec) { s.AWS.CrossZone = boolp(true) }},
	{name: "cross zone false is not unset", in: map[string]string{AWSCrossZoneLoadBalancing: "false"}, want: func(s *Spec) { s.AWS.CrossZone = boolp(false) }},
	{name: "cross zone yes", in: map[string]string{AWSCrossZoneLoadBalancing: "yes"}, errs: []wantErr{{AWSCrossZoneLoadBalancing, "yes", `"true" or "false"`}}},
	{name: "cross zone 1", in: map[string]string{AWSCrossZoneLoadBalancing: "1"}, errs: []wantErr{{AWSCrossZoneLoadBalancing, "1", `"true" or "false"`}}},

	// aws-load-balancer-additional-resource-tags
	{name: "tags", in: map[string]string{AWSAdditionalResourceTags: "team=web, env = prod,keyonly,eq=a=b"},
		want: func(s *Spec) {
			s.AWS.AdditionalTags = map[string]string{"team": "web", "env": "prod", "keyonly": "", "eq": "a=b"}
		}},
	{name: "tags at the limits", in: map[string]string{AWSAdditionalResourceTags: strings.Repeat("k", 128) + "=" + strings.Repeat("é", 256)},
		want: func(s *Spec) {
			s.AWS.AdditionalTags = map[string]string{strings.Repeat("k", 128): strings.Repeat("é", 256)}
		}},
	{name: "tags empty value", in: map[string]string{AWSAdditionalResourceTags: ""}},
	{name: "tags empty key", in: map[string]string{AWSAdditionalResourceTags: "a=1,=v"},
		errs: []wantErr{{AWSAdditionalResourceTags, "=v", "tag key must not be empty"}}},
	{name: "tags too long", in: map[string]string{AWSAdditionalResourceTags: strings.Repeat("k", 129) + "=v,k=" + strings.Repeat("v", 257)},
		errs: []wantErr{{AWSAdditionalResourceTags, strings.Repeat("k", 129), "at most 128"}, {AWSAdditionalResourceTags, strings.Repeat("v", 257), "at most 256"}}},
	{name: "tags reserved prefix", in: map[string]string{AWSAdditionalResourceTags: "AWS:foo=bar"},
		errs: []wantErr{{AWSAdditionalResourceTags, "AWS:foo", "reserved"}}},
	{name: "tags duplicate key", in: map[string]string{AWSAdditionalResourceTags: "a=1, a=2"},
		errs: []wantErr{{AWSAdditionalResourceTags, "a=2", "duplicate key"}}},
	{name: "tags empty item", in: map[string]string{AWSAdditionalResourceTags: "a=1,,b"},
		errs: []wantErr{{AWSAdditionalResourceTags, "a=1,,b", "empty item"}}},

	// aws-load-balancer-subnets
	{name: "subnets", in: map[string]string{AWSSubnets: "subnet-0abc, my-public-subnet"},
		want: func(s *Spec) { s.AWS.Subnets = []string{"subnet-0abc", "my-public-subnet"} }},
	{name: "subnets duplicate", in: map[string]string{AWSSubnets: "subnet-1,subnet-1"},
		errs: []wantErr{{AWSSubnets, "subnet-1", "duplicate subnet"}}},
	{name: "subnets trailing comma", in: map[string]string{AWSSubnets: "subnet-1,"},
		errs: []wantErr{{AWSSubnets, "subnet-1,", "empty item"}}},

	// aws-load-balancer-target-node-labels
	{name: "target node labels", in: map[string]string{AWSTargetNodeLabels: "node-role=lb, zone=,kubernetes.io/os=linux,ready"},
		want: func(s *Spec) {
			s.AWS.TargetNodeLabels = map[string]string{"node-role": "lb", "zone": "", "kubernetes.io/os": "linux", "ready": ""}
		}},
	{name: "target node labels bad key and value", in: map[string]string{AWSTargetNodeLabels: "bad key=x,k=bad value"},
		errs: []wantErr{{AWSTargetNodeLabels, "bad key", "invalid label key"}, {AWSTargetNodeLabels, "bad value", "invalid label value"}}},
	{name: "target node labels duplicate", in: map[string]string{AWSTargetNodeLabels: "k=1,k=2"},
		errs: []wantErr{{AWSTargetNodeLabels, "k=2", "duplicate key"}}},

	// aws-load-balancer-connection-idle-timeout
	{name: "idle timeout min", in: map[string]string{AWSConnectionIdleTimeout: "1"}, want: func(s *Spec) { s.AWS.ConnectionIdleTimeout = secs(1) }},
	{name: "idle timeout max", in: map[string]string{AWSConnectionIdleTimeout: "4000"}, want: func(s *Spec) { s.AWS.ConnectionIdleTimeout = secs(4000) }},
	{name: "idle timeout zero", in: map[string]string{AWSConnectionIdleTimeout: "0"}, errs: []wantErr{{AWSConnectionIdleTimeout, "0", "from 1 to 4000"}}},
	{name: "idle timeout too big", in: map[string]string{AWSConnectionIdleTimeout: "4001"}, errs: []wantErr{{AWSConnectionIdleTimeout, "4001", "from 1 to 4000"}}},
	{name: "idle timeout with unit", in: map[string]string{AWSConnectionIdleTimeout: "60s"}, errs: []wantErr{{AWSConnectionIdleTimeout, "60s", "integer number of seconds"}}},

	// aws-load-balancer-proxy-protocol
	{name: "proxy protocol", in: map[string]string{AWSProxyProtocol: "*"}, want: func(s *Spec) { s.AWS.ProxyProtocol = true }},
	{name: "proxy protocol true", in: map[string]string{AWSProxyProtocol: "true"}, errs: []wantErr{{AWSProxyProtocol, "true", `must be "*"`}}},
	{name: "proxy protocol empty", in: map[string]string{AWSProxyProtocol: ""}, errs: []wantErr{{AWSProxyProtocol, "", `must be "*"`}}},

	// aws-load-balancer-ssl-cert
	{name: "ssl cert ACM", in: map[string]string{AWSSSLCert: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b"},
		want: func(s *Spec) { s.AWS.SSLCert = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b" }},
	{name: "ssl cert IAM", in: map[string]string{AWSSSLCert: "arn:aws-cn:iam::123456789012:server-certificate/web"},
		want: func(s *Spec) { s.AWS.SSLCert = "arn:aws-cn:iam::123456789012:server-certificate/web" }},
	{name: "ssl cert name", in: map[string]string{AWSSSLCert: "my-cert"}, errs: []wantErr{{AWSSSLCert, "my-cert", "certificate ARN"}}},
	{name: "ssl cert other service", in: map[string]string{AWSSSLCert: "arn:aws:s3:::bucket"}, errs: []wantErr{{AWSSSLCert, "arn:aws:s3:::bucket", "certificate ARN"}}},
	{name: "ssl cert with space", in: map[string]string{AWSSSLCert: "arn:aws:acm:us-east-1:1:certificate/a b"},
		errs: []wantErr{{AWSSSLCert, "arn:aws:acm:us-east-1:1:certificate/a b", "certificate ARN"}}},
	{name: "ssl cert empty", in: map[string]string{AWSSSLCert: ""}, errs: []wantErr{{AWSSSLCert, "", "certificate ARN"}}},

	// aws-load-balancer-ssl-ports
	{name: "ssl ports star", in: map[string]string{AWSSSLPorts: "*"}, want: func(s *Spec) { s.AWS.SSLPorts = []string{"*"} }},
	{name: "ssl ports numbers and names", in: map[string]string{AWSSSLPorts: "443, https,08443"},
		want: func(s *Spec) { s.AWS.SSLPorts = []string{"443", "https", "8443"} }},
	{name: "ssl ports star combined", in: map[string]string{AWSSSLPorts: "*,443"}, errs: []wantErr{{AWSSSLPorts, "*,443", "cannot be combined"}}},
	{name: "ssl ports bad items", in: map[string]string{AWSSSLPorts: "70000,HTTPS,443,0443"},
		errs: []wantErr{{AWSSSLPorts, "0443", "duplicate port"}, {AWSSSLPorts, "70000", "out of range"}, {AWSSSLPorts, "HTTPS", "not a port number or port name"}}},
	{name: "ssl ports empty", in: map[string]string{AWSSSLPorts: ""}, errs: []wantErr{{AWSSSLPorts, "", "must not be empty"}}},

	// aws-load-balancer-backend-protocol
	{name: "backend protocol", in: map[string]string{AWSBackendProtocol: "HTTP"}, want: func(s *Spec) { s.AWS.BackendProtocol = "http" }},
	{name: "backend protocol ssl", in: map[string]string{AWSBackendProtocol: "ssl"}, want: func(s *Spec) { s.AWS.BackendProtocol = "ssl" }},
	{name: "backend protocol udp", in: map[string]string{AWSBackendProtocol: "udp"}, errs: []wantErr{{AWSBackendProtocol, "udp", `"http", "https", "ssl", "tcp"`}}},

	// health checks
	{name: "health check all set", in: map[string]string{
		AWSHealthCheckProtocol: "http", AWSHealthCheckPort: "8080", AWSHealthCheckPath: "/healthz",
		AWSHealthCheckHealthyThreshold: "2", AWSHealthCheckUnhealthyThreshold: "10",
		AWSHealthCheckTimeout: "2", AWSHealthCheckInterval: "300"},
		want: func(s *Spec) {
			s.AWS.HealthCheck = AWSHealthCheck{Protocol: "HTTP", Port: "8080", Path: "/healthz",
				HealthyThreshold: int32p(2), UnhealthyThreshold: int32p(10), Timeout: secs(2), Interval: secs(300)}
		}},
	{name: "health check other bounds", in: map[string]string{
		AWSHealthCheckProtocol: "Https", AWSHealthCheckPort: "traffic-port", AWSHealthCheckHealthyThreshold: "10",
		AWSHealthCheckUnhealthyThreshold: "2", AWSHealthCheckTimeout: "120", AWSHealthCheckInterval: "5"},
		want: func(s *Spec) {
			s.AWS.HealthCheck = AWSHealthCheck{Protocol: "HTTPS", Port: "traffic-port",
				HealthyThreshold: int32p(10), UnhealthyThreshold: int32p(2), Timeout: secs(120), Interval: secs(5)}
		}},
	{name: "health check tcp", in: map[string]string{AWSHealthCheckProtocol: "TCP", AWSHealthCheckPort: "65535"},
		want: func(s *Spec) { s.AWS.HealthCheck = AWSHealthCheck{Protocol: "TCP", Port: "65535"} }},
	{name: "health check every value bad", in: map[string]string{
		AWSHealthCheckProtocol: "udp", AWSHealthCheckPort: "0", AWSHealthCheckPath: "healthz",
		AWSHealthCheckHealthyThreshold: "1", AWSHealthCheckUnhealthyThreshold: "11",
		AWSHealthCheckTimeout: "121", AWSHealthCheckInterval: "4"},
		errs: []wantErr{
			{AWSHealthCheckHealthyThreshold, "1", "from 2 to 10"},
			{AWSHealthCheckInterval, "4", "from 5 to 300"},
			{AWSHealthCheckPath, "healthz", `starting with "/"`},
			{AWSHealthCheckPort, "0", `"traffic-port" or a port number`},
			{AWSHealthCheckProtocol, "udp", `"TCP", "HTTP", "HTTPS"`},
			{AWSHealthCheckTimeout, "121", "from 2 to 120"},
			{AWSHealthCheckUnhealthyThreshold, "11", "from 2 to 10"},
		}},
	{name: "health check more bad values", in: map[string]string{
		AWSHealthCheckPort: "Traffic-Port", AWSHealthCheckPath: "/a b",
		AWSHealthCheckHealthyThreshold: "x", AWSHealthCheckTimeout: "1", AWSHealthCheckInterval: "301"},
		errs: []wantErr{
			{AWSHealthCheckHealthyThreshold, "x", "integer"},
			{AWSHealthCheckInterval, "301", "from 5 to 300"},
			{AWSHealthCheckPath, "/a b", "without whitespace"},
			{AWSHealthCheckPort, "Traffic-Port", `"traffic-port"`},
			{AWSHealthCheckTimeout, "1", "from 2 to 120"},
		}},
	{name: "health check path too long", in: map[string]string{AWSHealthCheckPath: "/" + strings.Repeat("a", 1024), AWSHealthCheckPort: "65536"},
		errs: []wantErr{{AWSHealthCheckPath, "/" + strings.Repeat("a", 1024), "at most 1024"}, {AWSHealthCheckPort, "65536", "1 to 65535"}}},

	// portico-lb.io/address-pool and aliases
	{name: "address pool", in: map[string]string{AddressPool: "default"}, want: func(s *Spec) { s.BareMetal.AddressPool = "default" }},
	{name: "address pool MetalLB alias", in: map[string]string{MetalLBAddressPool: "pool-a"}, want: func(s *Spec) { s.BareMetal.AddressPool = "pool-a" }},
	{name: "address pool legacy alias", in: map[string]string{MetalLBLegacyAddressPool: "pool-b"}, want: func(s *Spec) { s.BareMetal.AddressPool = "pool-b" }},
	{name: "address pool key and alias agree", in: map[string]string{AddressPool: "pool-a", MetalLBLegacyAddressPool: " pool-a"},
		want: func(s *Spec) { s.BareMetal.AddressPool = "pool-a" }},
	{name: "address pool conflict", in: map[string]string{AddressPool: "pool-a", MetalLBAddressPool: "pool-b"},
		want: func(s *Spec) { s.BareMetal.AddressPool = "pool-a" },
		errs: []wantErr{{MetalLBAddressPool, "pool-b", "conflicts with portico-lb.io/address-pool"}}},
	{name: "address pool bad name", in: map[string]string{AddressPool: "Pool_1"}, errs: []wantErr{{AddressPool, "Pool_1", "DNS-1123"}}},
	{name: "address pool empty", in: map[string]string{AddressPool: ""}, errs: []wantErr{{AddressPool, "", "DNS-1123"}}},

	// portico-lb.io/allow-shared-ip and aliases
	{name: "allow shared ip", in: map[string]string{AllowSharedIP: "web"}, want: func(s *Spec) { s.BareMetal.AllowSharedIP = "web" }},
	{name: "allow shared ip MetalLB alias", in: map[string]string{MetalLBAllowSharedIP: "dns"}, want: func(s *Spec) { s.BareMetal.AllowSharedIP = "dns" }},
	{name: "allow shared ip legacy alias", in: map[string]string{MetalLBLegacyAllowSharedIP: "dns"}, want: func(s *Spec) { s.BareMetal.AllowSharedIP = "dns" }},
	{name: "allow shared ip conflict", in: map[string]string{MetalLBAllowSharedIP: "a", MetalLBLegacyAllowSharedIP: "b"},
		want: func(s *Spec) { s.BareMetal.AllowSharedIP = "a" },
		errs: []wantErr{{MetalLBLegacyAllowSharedIP, "b", "conflicts with metallb.io/allow-shared-ip"}}},
	{name: "allow shared ip empty", in: map[string]string{AllowSharedIP: " "}, errs: []wantErr{{AllowSharedIP, "", "non-empty"}}},

	// unknown and foreign keys
	{name: "portico typo", in: map[string]string{"portico-lb.io/interal": "true"},
		errs: []wantErr{{"portico-lb.io/interal", "true", `did you mean "portico-lb.io/internal"`}}},
	{name: "portico kube-vip casing", in: map[string]string{"portico-lb.io/loadbalancerIPs": "198.18.128.1"},
		errs: []wantErr{{"portico-lb.io/loadbalancerIPs", "198.18.128.1", `did you mean "portico-lb.io/loadBalancerIPs"`}}},
	{name: "portico unknown far from everything", in: map[string]string{"portico-lb.io/something-else": "x"},
		errs: []wantErr{{"portico-lb.io/something-else", "x", "unknown portico-lb.io/ annotation; known keys: portico-lb.io/internal"}}},
	{name: "foreign keys are ignored", in: map[string]string{
		"metallb.io/ip-allocated-from-pool": "x", "kube-vip.io/vipHost": "n1", "example.com/whatever": "y",
		"service.beta.kubernetes.io/aws-load-balancer-name": "x", "portico-lb.iox/internal": "nope"}},

	// aws-load-balancer-scheme
	{name: "scheme internal", in: map[string]string{AWSLoadBalancerScheme: "internal"}, want: func(s *Spec) { s.Internal = true }},
	{name: "scheme internet-facing agrees with internal false", in: map[string]string{AWSLoadBalancerScheme: "internet-facing", Internal: "false"}},
	{name: "scheme conflicts with the AWS internal key", in: map[string]string{AWSLoadBalancerScheme: "internet-facing", AWSLoadBalancerInternal: "true"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{AWSLoadBalancerScheme, "internet-facing", "conflicts with service.beta.kubernetes.io/aws-load-balancer-internal"}}},
	{name: "scheme bad value", in: map[string]string{AWSLoadBalancerScheme: "Internal"}, errs: []wantErr{{AWSLoadBalancerScheme, "Internal", `"internal" or "internet-facing"`}}},

	// TLS policy, draining, security groups
	{name: "ssl negotiation policy", in: map[string]string{AWSSSLNegotiationPolicy: "ELBSecurityPolicy-TLS13-1-2-2021-06"},
		want: func(s *Spec) { s.AWS.SSLNegotiationPolicy = "ELBSecurityPolicy-TLS13-1-2-2021-06" }},
	{name: "ssl negotiation policy bad", in: map[string]string{AWSSSLNegotiationPolicy: "my policy"}, errs: []wantErr{{AWSSSLNegotiationPolicy, "my policy", "predefined policy name"}}},
	{name: "connection draining", in: map[string]string{AWSConnectionDrainingEnabled: "true", AWSConnectionDrainingTimeout: "60"},
		want: func(s *Spec) { s.AWS.ConnectionDraining, s.AWS.ConnectionDrainingTimeout = boolp(true), secs(60) }},
	{name: "connection draining bad", in: map[string]string{AWSConnectionDrainingEnabled: "on", AWSConnectionDrainingTimeout: "0"},
		errs: []wantErr{{AWSConnectionDrainingEnabled, "on", `"true" or "false"`}, {AWSConnectionDrainingTimeout, "0", "from 1 to 3600"}}},
	{name: "security groups", in: map[string]string{AWSSecurityGroups: "sg-0a1, sg-0b2", AWSExtraSecurityGroups: "sg-ff"},
		want: func(s *Spec) {
			s.AWS.SecurityGroups, s.AWS.ExtraSecurityGroups = []string{"sg-0a1", "sg-0b2"}, []string{"sg-ff"}
		}},
	{name: "security groups bad", in: map[string]string{AWSSecurityGroups: "web", AWSExtraSecurityGroups: ""},
		errs: []wantErr{{AWSExtraSecurityGroups, "", "at least one"}, {AWSSecurityGroups, "web", "security group ID"}}},

	// several problems at once, sorted by key
	{name: "every problem reported in key order", in: map[string]string{
		Internal: "yes", AWSLoadBalancerType: "external", AddressPool: "UPPER", "portico-lb.io/zzz": "1",
		AWSHealthCheckInterval: "1", SourceRanges: "10.0.0.1", AWSSubnets: "subnet-1"},
		want: func(s *Spec) { s.AWS.Subnets = []string{"subnet-1"} },
		errs: []wantErr{
			{AddressPool, "UPPER", "DNS-1123"},
			{Internal, "yes", `"true" or "false"`},
			{"portico-lb.io/zzz", "1", "unknown"},
			{AWSHealthCheckInterval, "1", "from 5 to 300"},
			{AWSLoadBalancerType, "external", "AWS Load Balancer Controller"},
			{SourceRanges, "10.0.0.1", "10.0.0.1/32"},
		}},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := Parse(tc.in)
			want, _ := Parse(nil)
			if tc.want != nil {
				tc.want(&want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("spec:\n got %+v\nwant %+v", got, want)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.errs), errs)
			}
			for i, e := range errs {
				w := tc.errs[i]
				wantField := field.NewPath("metadata", "annotations").Key(w.key).String()
				if e.Type != field.ErrorTypeInvalid || e.Field != wantField || !reflect.DeepEqual(e.BadValue, w.bad) || !strings.Contains(e.Detail, w.contains) {
					t.Errorf("error %d: got %v (type %s, field %s, value %#v)\nwant field %s, value %#v, detail containing %q",
						i, e, e.Type, e.Field, e.BadValue, wantField, w.bad, w.contains)
				}
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	got, errs := Parse(nil)
	if errs != nil {
		t.Fatalf("errors for no annotations: %v", errs)
	}
	if want := (Spec{AWS: AWS{Type: AWSClassic}}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestEveryKeyHasCases makes adding a key without tests fail: every canonical key needs a valid
// and an invalid case in parseCases, every alias a valid case.
func TestEveryKeyHasCases(t *testing.T) {
	valid, invalid := map[string]bool{}, map[string]bool{}
	for _, tc := range parseCases {
		bad := map[string]bool{}
		for _, e := range tc.errs {
			bad[e.key] = true
			invalid[e.key] = true
		}
		for k := range tc.in {
			if !bad[k] {
				valid[k] = true
			}
		}
	}
	for _, k := range Keys {
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

func TestParseDoesNotModifyInput(t *testing.T) {
	in := map[string]string{Internal: " true ", SourceRanges: "10.0.0.1/8", "portico-lb.io/x": "y"}
	cp := map[string]string{}
	for k, v := range in {
		cp[k] = v
	}
	Parse(in)
	if !reflect.DeepEqual(in, cp) {
		t.Errorf("Parse modified its input: %v", in)
	}
}

// TestParseKeyAgreesWithParse: for every case, ParseKey of each key reports exactly the errors
// Parse reports for that key (and its aliases) and sets the same value, so a reader of one key
// (portico-agent's source ranges) accepts exactly what the controller accepts.
func TestParseKeyAgreesWithParse(t *testing.T) {
	for _, c := range parseCases {
		full, fullErrs := Parse(c.in)
		for _, k := range Keys {
			got, errs := ParseKey(c.in, k.Name)
			var want []string
			for _, e := range fullErrs {
				for _, n := range k.names() {
					if e.Field == field.NewPath("metadata", "annotations").Key(n).String() {
						want = append(want, e.Error())
					}
				}
			}
			var have []string
			for _, e := range errs {
				have = append(have, e.Error())
			}
			// Cross-key conflicts (internal vs the AWS internal and scheme keys) are Parse's alone.
			if k.Name == AWSLoadBalancerInternal || k.Name == AWSLoadBalancerScheme {
				continue
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("%s: ParseKey(%s) errors %q, Parse reports %q", c.name, k.Name, have, want)
			}
			if k.Name == SourceRanges && len(errs) == 0 && !reflect.DeepEqual(got.SourceRanges, full.SourceRanges) {
				t.Errorf("%s: ParseKey source ranges %v, Parse %v", c.name, got.SourceRanges, full.SourceRanges)
			}
		}
	}
}

func TestParseKeyUnknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ParseKey of an unknown key did not panic")
		}
	}()
	ParseKey(nil, "portico-lb.io/nope")
}
