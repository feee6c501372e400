package aws

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// The desired AWS resources of one Service, computed without any AWS call (desired), from the
// provider's options and the complete desired load balancer. apply* functions converge AWS to
// it.

const (
	schemeInternal       = "internal"
	schemeInternetFacing = "internet-facing"

	defaultTLSPolicy = "ELBSecurityPolicy-2016-08"
	healthzPath      = "/healthz"
	trafficPort      = "traffic-port"
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
	CrossZone *bool
	// IPAddressType is ipv4 or dualstack.
	IPAddressType string
	// EIPAllocations or PrivateIPv4s, one per subnet, used when the NLB is created.
	EIPAllocations []string
	PrivateIPv4s   []string
	// AccessLog holds the access_logs.s3.* attributes the Service sets.
	AccessLog map[string]string
	// TGAttributes are set on every target group.
	TGAttributes map[string]string
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
	CrossZone     *bool
	IdleTimeout   *int32
	ProxyProtocol bool
	// Draining and DrainingTimeout (seconds) are set when the Service asks.
	Draining        *bool
	DrainingTimeout *int32
	// SSLPolicy is the predefined policy of the TLS listeners; "" keeps the AWS default.
	SSLPolicy string
	// SecurityGroups replace the load balancer's own group when not empty.
	SecurityGroups []string
	// ExtraSecurityGroups are added to the load balancer's groups.
	ExtraSecurityGroups []string
	// AccessLog is set when the Service configures access logs.
	AccessLog *classicAccessLog
}

type classicAccessLog struct {
	Enabled      bool
	EmitInterval *int32
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

// desired computes the AWS resources for lb, or an *providers.InvalidError for input AWS cannot
// serve. It makes no AWS call.
func (p *Provider) desired(lb *providers.LoadBalancer) (desiredLB, error) {
	spec, err := optionsOf(lb)
	if err != nil {
		return desiredLB{}, err
	}
	kind := p.opts.DefaultType
	if kind == "" {
		kind = Classic
	}
	// The type annotation can only ask for nlb; its absence means the configured default.
	if spec.Kind == NLB {
		kind = NLB
	}
	if err := validate(lb, kind); err != nil {
		return desiredLB{}, err
	}
	scheme := schemeInternetFacing
	if lb.Internal {
		scheme = schemeInternal
	}
	d := desiredLB{
		Kind:        kind,
		Name:        lbName(p.opts.ClusterName, lb.Ref, kind, scheme),
		Scheme:      scheme,
		Tags:        resourceTags(p.opts.ClusterName, lb.Ref, p.opts.ExtraTags, spec),
		Subnets:     slices.Clone(spec.Subnets),
		SourceCIDRs: slices.Clone(lb.SourceRanges),

		ManageNodeRules: spec.ManageBackendSecurityGroupRules == nil || *spec.ManageBackendSecurityGroupRules,
	}
	if len(d.Subnets) == 0 {
		d.Subnets = slices.Clone(p.opts.Subnets)
	}
	if len(d.SourceCIDRs) == 0 {
		d.SourceCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
		if kind == NLB && spec.IPAddressType == "dualstack" {
			d.SourceCIDRs = append(d.SourceCIDRs, netip.MustParsePrefix("::/0"))
		}
	}
	if err := validateAccessLog(spec.AccessLog); err != nil {
		return desiredLB{}, err
	}
	instances, warnings := instanceIDs(lb.Nodes, spec.TargetNodeLabels)
	d.Instances = instances
	d.Warnings = append(d.Warnings, warnings...)
	switch kind {
	case NLB:
		d.NLB, err = nlbDesired(d.Name, lb, spec)
		if err == nil {
			err = nlbAddresses(&d.NLB, spec, scheme)
		}
		d.Warnings = append(d.Warnings, nlbWarnings(spec)...)
		if err == nil {
			err = checkNLBGroups(d)
		}
	default:
		d.Classic = classicDesired(lb, spec, p.opts.SecurityGroups)
		d.Warnings = append(d.Warnings, classicWarnings(spec)...)
		err = checkClassicGroups(d)
	}
	if err != nil {
		return desiredLB{}, err
	}
	if spec.SSLCert != "" && !slices.ContainsFunc(lb.Ports, func(pt providers.Port) bool { return sslPort(spec, pt) }) {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s names no port of the Service (%v): no listener uses the certificate", annotations.AWSSSLPorts, spec.SSLPorts))
	}
	return d, nil
}

// validate rejects what AWS cannot serve before anything is created.
func validate(lb *providers.LoadBalancer, kind Kind) error {
	if lb.SessionAffinity.ClientIP {
		return providers.Invalid("spec.sessionAffinity", "AWS load balancers do not support ClientIP affinity")
	}
	if len(lb.RequestedIPs) > 0 {
		return providers.Invalid("spec.loadBalancerIP", "AWS load balancers cannot be given an IP this way")
	}
	for _, f := range lb.IPFamilies {
		if f != providers.IPv4 {
			return providers.Invalid("spec.ipFamilies", "the AWS provider serves IPv4 only")
		}
	}
	if len(lb.Ports) == 0 {
		return providers.Invalid("spec.ports", "a load balancer needs at least one port")
	}
	for i, pt := range lb.Ports {
		path := fmt.Sprintf("spec.ports[%d]", i)
		if pt.NodePort == 0 {
			return providers.Invalid(path+".nodePort", "AWS load balancers forward to node ports; allocateLoadBalancerNodePorts must not be false")
		}
		switch {
		case pt.Protocol == providers.TCP:
		case pt.Protocol == providers.UDP && kind == NLB:
		case pt.Protocol == providers.UDP:
			return providers.Invalid(path+".protocol", "a Classic ELB serves TCP only; set %s: nlb for UDP", annotations.AWSLoadBalancerType)
		default:
			return providers.Invalid(path+".protocol", "AWS load balancers do not serve %s", pt.Protocol)
		}
	}
	return nil
}

// instanceIDs maps nodes to EC2 instances through spec.providerID (aws:///zone/i-...), keeping
// only nodes with every target label.
func instanceIDs(nodes []providers.Node, labels map[string]string) ([]string, []string) {
	var ids, warnings []string
	for _, n := range nodes {
		if !matchLabels(n.Labels, labels) {
			continue
		}
		id, ok := instanceID(n.ProviderID)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("node %s has providerID %q, not aws:///<zone>/<instance-id>; it is not a backend", n.Name, n.ProviderID))
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), warnings
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// instanceID returns the instance ID of an AWS providerID: aws:///us-east-1a/i-0123 or
// aws://us-east-1a/i-0123 (both forms exist), or a bare i-0123.
func instanceID(providerID string) (string, bool) {
	rest := providerID
	if r, ok := strings.CutPrefix(providerID, "aws://"); ok {
		rest = r
	} else if !strings.HasPrefix(providerID, "i-") {
		return "", false
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.HasPrefix(id, "i-") || len(id) < 3 {
		return "", false
	}
	return id, true
}

func sslPort(spec ServiceOptions, pt providers.Port) bool {
	if spec.SSLCert == "" || pt.Protocol != providers.TCP {
		return false
	}
	if len(spec.SSLPorts) == 0 {
		return true
	}
	for _, s := range spec.SSLPorts {
		if s == "*" || s == pt.Name || s == strconv.Itoa(int(pt.Port)) {
			return true
		}
	}
	return false
}

// nlbDesired builds one listener and target group per port number: TCP_UDP when the number
// carries both protocols, TLS when the certificate applies to it.
func nlbDesired(name string, lb *providers.LoadBalancer, spec ServiceOptions) (nlbSpec, error) {
	byPort := map[int32][]providers.Port{}
	var order []int32
	for _, pt := range lb.Ports {
		if _, ok := byPort[pt.Port]; !ok {
			order = append(order, pt.Port)
		}
		byPort[pt.Port] = append(byPort[pt.Port], pt)
	}
	slices.Sort(order)
	out := nlbSpec{CrossZone: spec.CrossZone, IPAddressType: "ipv4", TGAttributes: maps.Clone(spec.TargetGroupAttributes)}
	if spec.IPAddressType != "" {
		out.IPAddressType = spec.IPAddressType
	}
	if al := spec.AccessLog; al.Enabled != nil || al.Bucket != "" || al.Prefix != "" {
		out.AccessLog = map[string]string{}
		if al.Enabled != nil {
			out.AccessLog["access_logs.s3.enabled"] = strconv.FormatBool(*al.Enabled)
		}
		if al.Bucket != "" {
			out.AccessLog["access_logs.s3.bucket"] = al.Bucket
		}
		if al.Prefix != "" {
			out.AccessLog["access_logs.s3.prefix"] = al.Prefix
		}
	}
	for _, port := range order {
		pts := byPort[port]
		l := nlbListener{Port: port}
		nodePort := pts[0].NodePort
		switch {
		case len(pts) == 1 && pts[0].Protocol == providers.UDP:
			l.Protocol = "UDP"
		case len(pts) == 1:
			l.Protocol = "TCP"
		default:
			for _, pt := range pts[1:] {
				if pt.NodePort != nodePort {
					return nlbSpec{}, providers.Invalid("spec.ports", "port %d serves TCP and UDP on different node ports (%d, %d); an NLB TCP_UDP listener forwards both to one node port", port, nodePort, pt.NodePort)
				}
			}
			l.Protocol = "TCP_UDP"
		}
		tgProtocol := l.Protocol
		if l.Protocol == "TCP" && sslPort(spec, pts[0]) {
			l.Protocol, l.CertARN, l.SSLPolicy, l.ALPN = "TLS", spec.SSLCert, defaultTLSPolicy, spec.ALPNPolicy
			if spec.SSLNegotiationPolicy != "" {
				l.SSLPolicy = spec.SSLNegotiationPolicy
			}
			if spec.BackendProtocol == "ssl" {
				tgProtocol = "TLS"
			}
		}
		hc := nlbHealthCheck(lb, spec.HealthCheck)
		l.TG = targetGroupSpec{
			// A target group's health-check protocol is not reliably changeable in place
			// (kubernetes/kubernetes#80996): it is part of the name, so a change makes a new group.
			Name:     targetGroupName(name, tgProtocol+"/"+hc.Protocol, nodePort, port),
			Protocol: tgProtocol,
			Port:     nodePort,
			HC:       hc,
		}
		out.Listeners = append(out.Listeners, l)
	}
	return out, nil
}

// nlbHealthCheck: HTTP /healthz on the health-check node port for externalTrafficPolicy: Local,
// TCP on the traffic port otherwise, each annotation overriding its part.
func nlbHealthCheck(lb *providers.LoadBalancer, o HealthCheckOptions) healthCheck {
	hc := healthCheck{Protocol: "TCP", Port: trafficPort, Interval: 30, Timeout: 10, Healthy: 3, Unhealthy: 3}
	if lb.LocalTrafficOnly && lb.HealthCheckNodePort != 0 {
		hc = healthCheck{Protocol: "HTTP", Port: itoa(lb.HealthCheckNodePort), Path: healthzPath, Interval: 10, Timeout: 6, Healthy: 2, Unhealthy: 2}
	}
	if o.Protocol != "" {
		hc.Protocol = strings.ToUpper(o.Protocol)
	}
	if o.Port != "" {
		hc.Port = o.Port
	}
	if o.Path != "" {
		hc.Path = o.Path
	}
	if hc.Protocol == "TCP" {
		hc.Path = ""
	} else if hc.Path == "" {
		hc.Path = healthzPath
	}
	setInt32(&hc.Healthy, o.HealthyThreshold)
	setInt32(&hc.Unhealthy, o.UnhealthyThreshold)
	setSeconds(&hc.Timeout, o.Timeout)
	setSeconds(&hc.Interval, o.Interval)
	return hc
}

// nlbNodeRules are the node security-group rules an NLB without security groups needs: client
// traffic to every node port from the source ranges, health checks from the load balancer's
// subnets, and ICMP "fragmentation needed" (path MTU discovery) from the source ranges.
func nlbNodeRules(d desiredLB, subnetCIDRs []netip.Prefix) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	add := func(r sgRule) {
		if !seen[r.key()] {
			seen[r.key()] = true
			rules = append(rules, r)
		}
	}
	for _, l := range d.NLB.Listeners {
		for _, proto := range transportProtocols(l.TG.Protocol) {
			for _, c := range d.SourceCIDRs {
				add(sgRule{Protocol: proto, From: l.TG.Port, To: l.TG.Port, CIDR: c, Purpose: "client"})
			}
		}
	}
	for _, l := range d.NLB.Listeners {
		port := l.TG.Port
		if l.TG.HC.Port != trafficPort {
			n, _ := strconv.Atoi(l.TG.HC.Port)
			port = int32(n)
		}
		for _, c := range subnetCIDRs {
			add(sgRule{Protocol: "tcp", From: port, To: port, CIDR: c, Purpose: "health"})
		}
	}
	rules = append(rules, mtuRules(d.SourceCIDRs, seen)...)
	return rules
}

func mtuRules(cidrs []netip.Prefix, seen map[string]bool) []sgRule {
	var out []sgRule
	for _, c := range cidrs {
		r := sgRule{Protocol: "icmp", From: 3, To: 4, CIDR: c, Purpose: "mtu"}
		if c.Addr().Is6() {
			r = sgRule{Protocol: "icmpv6", From: 2, To: 0, CIDR: c, Purpose: "mtu"}
		}
		if !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, r)
		}
	}
	return out
}

func transportProtocols(tgProtocol string) []string {
	switch tgProtocol {
	case "UDP":
		return []string{"udp"}
	case "TCP_UDP":
		return []string{"tcp", "udp"}
	}
	return []string{"tcp"}
}

// nlbWarnings name the keys set on the Service that apply to Classic ELBs only, one each.
func nlbWarnings(spec ServiceOptions) []string {
	var w []string
	for _, k := range []struct {
		set bool
		key string
	}{
		{spec.ProxyProtocol, annotations.AWSProxyProtocol},
		{spec.ConnectionIdleTimeout != nil, annotations.AWSConnectionIdleTimeout},
		{spec.ConnectionDraining != nil, annotations.AWSConnectionDrainingEnabled},
		{spec.ConnectionDrainingTimeout != nil, annotations.AWSConnectionDrainingTimeout},
		{len(spec.SecurityGroups) > 0, annotations.AWSSecurityGroups},
		{len(spec.ExtraSecurityGroups) > 0, annotations.AWSExtraSecurityGroups},
		{spec.AccessLog.EmitInterval != nil, annotations.AWSAccessLogEmitInterval},
	} {
		if k.set {
			w = append(w, notForKind(k.key, "nlb"))
		}
	}
	if spec.BackendProtocol == "http" || spec.BackendProtocol == "https" {
		w = append(w, fmt.Sprintf("%s=%s does not apply to an NLB, which forwards TCP; it is ignored", annotations.AWSBackendProtocol, spec.BackendProtocol))
	}
	return w
}

// classicWarnings name the keys set on the Service that apply to NLBs only, one each.
func classicWarnings(spec ServiceOptions) []string {
	var w []string
	for _, k := range []struct {
		set bool
		key string
	}{
		{len(spec.TargetGroupAttributes) > 0, annotations.AWSTargetGroupAttributes},
		{len(spec.EIPAllocations) > 0, annotations.AWSEIPAllocations},
		{len(spec.PrivateIPv4Addresses) > 0, annotations.AWSPrivateIPv4Addresses},
		{spec.NLBTargetType != "", annotations.AWSNLBTargetType},
		{spec.IPAddressType != "", annotations.AWSIPAddressType},
		{spec.ALPNPolicy != "", annotations.AWSALPNPolicy},
	} {
		if k.set {
			w = append(w, notForKind(k.key, "classic"))
		}
	}
	return w
}

// validateAccessLog: logs turned on need a bucket.
func validateAccessLog(al AccessLogOptions) error {
	if al.Enabled != nil && *al.Enabled && al.Bucket == "" {
		return providers.Invalid("metadata.annotations["+annotations.AWSAccessLogEnabled+"]", "access logs need a bucket: set %s", annotations.AWSAccessLogS3BucketName)
	}
	return nil
}

// nlbAddresses takes the EIP or private-address annotation: EIPs for an internet-facing NLB,
// private addresses for an internal one, never both. Their count is checked against the
// subnets when the NLB is created.
func nlbAddresses(n *nlbSpec, spec ServiceOptions, scheme string) error {
	switch {
	case len(spec.EIPAllocations) > 0 && len(spec.PrivateIPv4Addresses) > 0:
		return providers.Invalid("metadata.annotations["+annotations.AWSEIPAllocations+"]", "set %s (internet-facing) or %s (internal), not both", annotations.AWSEIPAllocations, annotations.AWSPrivateIPv4Addresses)
	case len(spec.EIPAllocations) > 0 && scheme != schemeInternetFacing:
		return providers.Invalid("metadata.annotations["+annotations.AWSEIPAllocations+"]", "Elastic IPs apply to internet-facing NLBs; this one is internal (use %s)", annotations.AWSPrivateIPv4Addresses)
	case len(spec.PrivateIPv4Addresses) > 0 && scheme != schemeInternal:
		return providers.Invalid("metadata.annotations["+annotations.AWSPrivateIPv4Addresses+"]", "private addresses apply to internal NLBs; this one is internet-facing (use %s)", annotations.AWSEIPAllocations)
	}
	n.EIPAllocations = slices.Clone(spec.EIPAllocations)
	for _, a := range spec.PrivateIPv4Addresses {
		n.PrivateIPv4s = append(n.PrivateIPv4s, a.String())
	}
	return nil
}

func notForKind(key, kind string) string {
	return fmt.Sprintf("%s does not apply to load balancers of type %s; it is ignored", key, kind)
}

// classicDesired builds a Classic ELB: one listener per port, the backend protocol and TLS as
// cloud-provider-aws does, one health check.
func classicDesired(lb *providers.LoadBalancer, spec ServiceOptions, defaultSGs []string) classicSpec {
	backend := spec.BackendProtocol
	if backend == "" {
		backend = "tcp"
	}
	out := classicSpec{
		CrossZone:      spec.CrossZone,
		ProxyProtocol:  spec.ProxyProtocol,
		SecurityGroups: slices.Clone(defaultSGs),
		Draining:       spec.ConnectionDraining,
		SSLPolicy:      spec.SSLNegotiationPolicy,

		ExtraSecurityGroups: slices.Clone(spec.ExtraSecurityGroups),
	}
	if len(spec.SecurityGroups) > 0 {
		out.SecurityGroups = slices.Clone(spec.SecurityGroups)
	}
	if spec.ConnectionDrainingTimeout != nil {
		s := int32(*spec.ConnectionDrainingTimeout / time.Second)
		out.DrainingTimeout = &s
	}
	if spec.ConnectionIdleTimeout != nil {
		s := int32(*spec.ConnectionIdleTimeout / time.Second)
		out.IdleTimeout = &s
	}
	if al := spec.AccessLog; al.Enabled != nil || al.EmitInterval != nil || al.Bucket != "" || al.Prefix != "" {
		out.AccessLog = &classicAccessLog{Enabled: al.Enabled != nil && *al.Enabled, EmitInterval: al.EmitInterval, Bucket: al.Bucket, Prefix: al.Prefix}
	}
	ports := slices.Clone(lb.Ports)
	slices.SortFunc(ports, func(a, b providers.Port) int { return int(a.Port - b.Port) })
	for _, pt := range ports {
		l := classicListener{Port: pt.Port, InstancePort: pt.NodePort, InstanceProtocol: strings.ToUpper(backend)}
		tls := sslPort(spec, pt)
		switch backend {
		case "http", "https":
			l.Protocol = "HTTP"
			if tls {
				l.Protocol = "HTTPS"
			}
		default: // tcp, ssl
			l.Protocol = "TCP"
			if tls {
				l.Protocol = "SSL"
			}
		}
		if tls {
			l.CertARN = spec.SSLCert
		}
		out.Listeners = append(out.Listeners, l)
	}
	out.HealthCheck = classicHealth(lb, spec.HealthCheck, out.Listeners[0])
	return out
}

// classicHealth: TCP (SSL for an ssl/https backend) on the first listener's node port, HTTP
// /healthz on the health-check node port for externalTrafficPolicy: Local; 10/5/2/6 as
// cloud-provider-aws; each annotation overriding its part.
func classicHealth(lb *providers.LoadBalancer, o HealthCheckOptions, first classicListener) classicHealthCheck {
	proto, port, path := "TCP", itoa(first.InstancePort), ""
	if first.InstanceProtocol == "SSL" || first.InstanceProtocol == "HTTPS" {
		proto = "SSL"
	}
	if lb.LocalTrafficOnly && lb.HealthCheckNodePort != 0 {
		proto, port, path = "HTTP", itoa(lb.HealthCheckNodePort), healthzPath
	}
	if o.Protocol != "" {
		proto = strings.ToUpper(o.Protocol)
	}
	if o.Port == trafficPort {
		port = itoa(first.InstancePort)
	} else if o.Port != "" {
		port = o.Port
	}
	if o.Path != "" {
		path = o.Path
	}
	target := proto + ":" + port
	if proto == "HTTP" || proto == "HTTPS" {
		if path == "" {
			path = healthzPath
		}
		target += path
	}
	hc := classicHealthCheck{Target: target, Interval: 10, Timeout: 5, Healthy: 2, Unhealthy: 6}
	setInt32(&hc.Healthy, o.HealthyThreshold)
	setInt32(&hc.Unhealthy, o.UnhealthyThreshold)
	setSeconds(&hc.Timeout, o.Timeout)
	setSeconds(&hc.Interval, o.Interval)
	return hc
}

// checkClassicGroups rejects source ranges that need more own security groups than a Classic
// ELB can take besides its extra groups and the backend group.
func checkClassicGroups(d desiredLB) error {
	backend := 0
	if d.ManageNodeRules {
		backend = 1
	}
	if given := len(d.Classic.SecurityGroups); given > 0 {
		if n := given + len(d.Classic.ExtraSecurityGroups) + backend; n > maxClassicGroups {
			return providers.Invalid("metadata.annotations["+annotations.AWSSecurityGroups+"]", "%d security groups, %d extra ones and the cluster's backend group make %d; a Classic ELB takes at most %d", given, len(d.Classic.ExtraSecurityGroups), n, maxClassicGroups)
		}
		return nil
	}
	n := len(splitRules(classicRules(d), maxRulesPerGroup))
	if room := maxClassicGroups - len(d.Classic.ExtraSecurityGroups) - backend; n > room {
		return providers.Invalid("spec.loadBalancerSourceRanges", "%d source ranges need %d rules, %d security groups of %d rules; a Classic ELB takes at most %d groups, %d of them given as extra groups and %d the cluster's backend group: shorten the list",
			len(d.SourceCIDRs), len(classicRules(d)), n, maxRulesPerGroup, maxClassicGroups, len(d.Classic.ExtraSecurityGroups), backend)
	}
	return nil
}

// checkNLBGroups rejects source ranges that need more own security groups than an NLB can take
// besides the backend group.
func checkNLBGroups(d desiredLB) error {
	n := len(splitRules(nlbFrontendRules(d), maxRulesPerGroup))
	if room := maxNLBGroups - 1; n > room {
		return providers.Invalid("spec.loadBalancerSourceRanges", "%d source ranges need %d rules, %d security groups of %d rules; an NLB takes at most %d groups, one of them the cluster's backend group: shorten the list",
			len(d.SourceCIDRs), len(nlbFrontendRules(d)), n, maxRulesPerGroup, maxNLBGroups)
	}
	return nil
}

// nlbFrontendRules are the ingress rules of an NLB's own security groups: every listener port
// and protocol, and ICMP "fragmentation needed", from the source ranges.
func nlbFrontendRules(d desiredLB) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	for _, l := range d.NLB.Listeners {
		for _, proto := range transportProtocols(l.Protocol) {
			for _, c := range d.SourceCIDRs {
				r := sgRule{Protocol: proto, From: l.Port, To: l.Port, CIDR: c, Purpose: "client"}
				if !seen[r.key()] {
					seen[r.key()] = true
					rules = append(rules, r)
				}
			}
		}
	}
	return append(rules, mtuRules(d.SourceCIDRs, seen)...)
}

// classicRules are the ingress rules of a Classic ELB's own security group: every listener port
// and ICMP "fragmentation needed" from the source ranges.
func classicRules(d desiredLB) []sgRule {
	var rules []sgRule
	seen := map[string]bool{}
	for _, l := range d.Classic.Listeners {
		for _, c := range d.SourceCIDRs {
			r := sgRule{Protocol: "tcp", From: l.Port, To: l.Port, CIDR: c, Purpose: "client"}
			if !seen[r.key()] {
				seen[r.key()] = true
				rules = append(rules, r)
			}
		}
	}
	return append(rules, mtuRules(d.SourceCIDRs, seen)...)
}

func setInt32(dst *int32, v *int32) {
	if v != nil {
		*dst = *v
	}
}

func setSeconds(dst *int32, v *time.Duration) {
	if v != nil {
		*dst = int32(*v / time.Second)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
