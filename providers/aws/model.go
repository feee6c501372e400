package aws

import (
	"fmt"
	"net/netip"
)

// The model: the desired AWS resources of one Service (desiredLB and its parts). desired.go
// computes it without any AWS call from the complete desired load balancer and the Service's
// AWS options; the resource files (nlb.go, classic.go, listeners.go, targetgroups.go,
// securitygroups.go, ...) converge AWS to it.

const (
	schemeInternal       = "internal"
	schemeInternetFacing = "internet-facing"

	defaultTLSPolicy = "ELBSecurityPolicy-2016-08"

	// Classic ELB attribute defaults, restored when the Service's annotation goes: those
	// cloud-provider-aws applies (cross-zone off, idle timeout 60 s, draining and access logs
	// off) and AWS's own for the values it leaves unset (draining timeout 300 s, access-log
	// interval 60 min).
	classicDefaultIdleTimeout     = 60
	classicDefaultDrainingTimeout = 300
	classicDefaultEmitInterval    = 60
	healthzPath                   = "/healthz"
	trafficPort                   = "traffic-port"
)

// desiredLB is one Service's load balancer as AWS should hold it.
type desiredLB struct {
	Kind   Kind
	Name   string
	Scheme string
	Tags   map[string]string
	// Subnets named by the Service or the configuration; empty means discovery by tags.
	Subnets []string
	// Instances are the backend instance IDs, sorted.
	Instances []string
	// SourceCIDRs allowed in; 0.0.0.0/0 when the Service sets none.
	SourceCIDRs []netip.Prefix
	NLB         nlbSpec
	Classic     classicSpec
	// ManageNodeRules: the provider adds and removes rules in the nodes' security groups.
	ManageNodeRules bool
	// Warnings name settings that do not apply to the chosen kind; they change nothing.
	Warnings []string
}

// nlbSpec is the NLB part of desiredLB.
type nlbSpec struct {
	Listeners []nlbListener // sorted by port
	// IPAddressType is ipv4 or dualstack.
	IPAddressType string
	// EIPAllocations or PrivateIPv4s, one per subnet, used when the NLB is created.
	EIPAllocations []string
	PrivateIPv4s   []string
	// Attributes are the load-balancer attributes the provider manages (cross-zone, access
	// logs): the Service's value, else the default (nlbDefaultAttributes), so that removing an
	// annotation restores the default.
	Attributes map[string]string
}

type nlbListener struct {
	Port      int32
	Protocol  string // TCP, UDP, TCP_UDP, TLS
	CertARN   string
	SSLPolicy string
	// ALPN is the ALPN policy of a TLS listener; "" leaves it unset.
	ALPN string
	TG   targetGroupSpec
}

type targetGroupSpec struct {
	Name     string
	Protocol string // TCP, UDP, TCP_UDP, TLS
	Port     int32  // the node port
	HC       healthCheck
	// Attributes are the target-group attributes it is converged to: the Service's values over
	// tgDefaultAttributes, those its protocol takes (tgAttributes).
	Attributes map[string]string
}

// healthCheck is an NLB target-group health check.
type healthCheck struct {
	Protocol           string // TCP, HTTP, HTTPS
	Port               string // "traffic-port" or a number
	Path               string // HTTP(S) only
	Interval, Timeout  int32
	Healthy, Unhealthy int32
}

// classicSpec is the Classic ELB part of desiredLB.
type classicSpec struct {
	Listeners     []classicListener // sorted by port
	HealthCheck   classicHealthCheck
	ProxyProtocol bool
	// The attributes are always complete: the Service's value, else the default
	// (cloud-provider-aws's and AWS's), so that removing an annotation restores the default.
	CrossZone   bool
	IdleTimeout int32 // seconds
	// Draining and DrainingTimeout (seconds): connection draining.
	Draining        bool
	DrainingTimeout int32
	// SSLPolicy is the predefined policy of the TLS listeners; "" keeps the AWS default.
	SSLPolicy string
	// SecurityGroups replace the load balancer's own group when not empty.
	SecurityGroups []string
	// ExtraSecurityGroups are added to the load balancer's groups.
	ExtraSecurityGroups []string
	// AccessLog: off unless the Service turns it on.
	AccessLog classicAccessLog
}

// classicAccessLog is the access-log attribute; EmitInterval, Bucket and Prefix matter only
// when Enabled (turning logs off leaves them as they are, as AWS does).
type classicAccessLog struct {
	Enabled      bool
	EmitInterval int32 // minutes
	Bucket       string
	Prefix       string
}

type classicListener struct {
	Port             int32
	Protocol         string // TCP, SSL, HTTP, HTTPS
	InstancePort     int32
	InstanceProtocol string
	CertARN          string
}

type classicHealthCheck struct {
	Target             string // e.g. "TCP:30080" or "HTTP:32000/healthz"
	Interval, Timeout  int32
	Healthy, Unhealthy int32
}

// sgRule is one ingress rule the provider owns in a security group.
type sgRule struct {
	Protocol string // tcp, udp, icmp, icmpv6, -1
	From, To int32  // ports; ICMP type and code
	CIDR     netip.Prefix
	// Group is a source security group instead of CIDR.
	Group   string
	Purpose string
}

func (r sgRule) key() string {
	src := r.Group
	if src == "" {
		src = r.CIDR.String()
	}
	return fmt.Sprintf("%s/%d/%d/%s", r.Protocol, r.From, r.To, src)
}
