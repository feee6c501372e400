package moto

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// LoadBalancer is one load balancer of either kind as moto holds it, read with the harness's
// User-Agent (left out of Calls).
type LoadBalancer struct {
	Kind   Kind   // KindClassicLB or KindLoadBalancer
	Type   string // ELBv2 type ("network"); "classic" for a Classic ELB
	Name   string
	ARN    string // ELBv2 only
	DNS    string
	Scheme string
	Tags   map[string]string
	// Attrs: the ELBv2 load-balancer attributes; for a Classic ELB "cross_zone" = "true" or
	// "false", "idle_timeout" (seconds), "draining" ("<enabled>/<timeout>") and "access_log"
	// ("false", or "true/<interval>/<bucket>/<prefix>").
	Attrs map[string]string
	// Listeners, sorted by port and protocol.
	Listeners []Listener
	// Classic ELB only: the registered instances (sorted) and the health-check target.
	Instances   []string
	HealthCheck string
	// HealthCheckTiming is "<interval>/<timeout>/<healthy>/<unhealthy>" (Classic ELB here, an
	// ELBv2 target group's on its Listener).
	HealthCheckTiming string
	// Classic ELB only: the backend-server policy names by instance port (PROXY protocol).
	BackendPolicies map[int32][]string
	// SecurityGroups attached to the load balancer itself (Classic ELB; an NLB created with
	// security groups), with their rules.
	SecurityGroups []SecurityGroup
}

// Listener is one listener. For an ELBv2 load balancer it carries its target group.
type Listener struct {
	Protocol string
	Port     int32
	Cert     string
	// BackendProtocol and BackendPort: the target group's (ELBv2) or the instance protocol
	// and port (Classic ELB).
	BackendProtocol string
	BackendPort     int32
	// ELBv2 only.
	TargetGroup string
	Targets     []string // instance IDs, sorted
	HealthCheck string   // "TCP:traffic-port", "HTTP:32000/healthz"
	// HealthCheckTiming is "<interval>/<timeout>/<healthy>/<unhealthy>".
	HealthCheckTiming string
	// TargetGroupAttrs: the target group's attributes (proxy_protocol_v2.enabled ...).
	TargetGroupAttrs map[string]string
}

// SecurityGroup is an EC2 security group with its ingress rules.
type SecurityGroup struct {
	ID    string
	Name  string
	Tags  map[string]string
	Rules []SGRule
}

// SGRule is one ingress rule of a security group for one IPv4 or IPv6 range or one source group.
type SGRule struct {
	Protocol    string // "tcp", "udp", "icmp", "-1"
	FromPort    int32
	ToPort      int32
	CIDR        string // the IPv4 or IPv6 range, or
	SourceGroup string // the source security group's ID
	Description string
}

func (r SGRule) String() string {
	what := fmt.Sprintf("%s %d-%d", r.Protocol, r.FromPort, r.ToPort)
	switch {
	case r.Protocol == "-1":
		what = "all traffic"
	case r.Protocol == "icmp": // the ports are the ICMP type and code
		what = fmt.Sprintf("icmp type %d code %d", r.FromPort, r.ToPort)
	case r.FromPort == r.ToPort:
		what = fmt.Sprintf("%s %d", r.Protocol, r.FromPort)
	}
	s := fmt.Sprintf("%s from %s%s", what, r.CIDR, r.SourceGroup)
	if r.Description != "" {
		s += " (" + r.Description + ")"
	}
	return s
}

// LoadBalancers reads every load balancer moto holds, of both kinds, sorted by name.
func (s *Server) LoadBalancers(ctx context.Context) ([]LoadBalancer, error) {
	return s.describeLBs(ctx, func(string) bool { return true })
}

// LoadBalancerByDNS reads the load balancer whose DNS name is dns, or nil when moto holds none.
// Only that one is described in full.
func (s *Server) LoadBalancerByDNS(ctx context.Context, dns string) (*LoadBalancer, error) {
	lbs, err := s.describeLBs(ctx, func(d string) bool { return sameDNS(d, dns) })
	if err != nil || len(lbs) == 0 {
		return nil, err
	}
	return &lbs[0], nil
}

// HoldsLoadBalancer reports whether moto holds a load balancer of either kind named by dns,
// listing names only.
func (s *Server) HoldsLoadBalancer(ctx context.Context, dns string) (bool, error) {
	found := false
	_, err := s.describeLBs(ctx, func(d string) bool {
		found = found || sameDNS(d, dns)
		return false
	})
	return found, err
}

// sameDNS reports whether moto's DNS name d is dns, also in the form AWS gives an NLB
// ("<name>-<id>.elb.<region>.amazonaws.com", which Proxy.AWSDefaults answers with) where moto
// says "<name>-<id>.<region>.elb.amazonaws.com".
func sameDNS(d, dns string) bool { return d == dns || nlbDNS(d) == dns }

// nlbDNS turns moto's "<host>.<region>.elb.amazonaws.com" into AWS's NLB form
// "<host>.elb.<region>.amazonaws.com"; other names are returned as they are.
func nlbDNS(d string) string {
	rest, ok := strings.CutSuffix(d, ".elb.amazonaws.com")
	if !ok {
		return d
	}
	i := strings.LastIndex(rest, ".")
	if i < 0 {
		return d
	}
	return rest[:i] + ".elb." + rest[i+1:] + ".amazonaws.com"
}

// describeLBs lists the load balancers of both kinds and describes in full those whose DNS
// name match accepts, sorted by name.
func (s *Server) describeLBs(ctx context.Context, match func(dns string) bool) ([]LoadBalancer, error) {
	cfg := s.harnessConfig()
	v2 := elbv2.NewFromConfig(cfg)
	var out []LoadBalancer
	lbs := elbv2.NewDescribeLoadBalancersPaginator(v2, &elbv2.DescribeLoadBalancersInput{})
	for lbs.HasMorePages() {
		page, err := lbs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing load balancers: %w", err)
		}
		for _, l := range page.LoadBalancers {
			if !match(aws.ToString(l.DNSName)) {
				continue
			}
			lb := LoadBalancer{Kind: KindLoadBalancer, Type: string(l.Type), Name: aws.ToString(l.LoadBalancerName),
				ARN: aws.ToString(l.LoadBalancerArn), DNS: aws.ToString(l.DNSName), Scheme: string(l.Scheme)}
			if err := s.describeV2(ctx, v2, &lb); err != nil {
				return nil, err
			}
			if len(l.SecurityGroups) > 0 {
				if lb.SecurityGroups, err = s.SecurityGroups(ctx, l.SecurityGroups...); err != nil {
					return nil, err
				}
			}
			out = append(out, lb)
		}
	}
	cl := elb.NewFromConfig(cfg)
	classic := elb.NewDescribeLoadBalancersPaginator(cl, &elb.DescribeLoadBalancersInput{})
	for classic.HasMorePages() {
		page, err := classic.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing classic load balancers: %w", err)
		}
		for _, d := range page.LoadBalancerDescriptions {
			if !match(aws.ToString(d.DNSName)) {
				continue
			}
			lb, err := s.describeClassic(ctx, cl, d)
			if err != nil {
				return nil, err
			}
			out = append(out, lb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// describeClassic reads a Classic ELB's listeners, instances, health check, backend policies,
// cross-zone attribute, tags and security groups.
func (s *Server) describeClassic(ctx context.Context, cl *elb.Client, d elbtypes.LoadBalancerDescription) (LoadBalancer, error) {
	lb := LoadBalancer{Kind: KindClassicLB, Type: "classic", Name: aws.ToString(d.LoadBalancerName),
		DNS: aws.ToString(d.DNSName), Scheme: aws.ToString(d.Scheme), Tags: map[string]string{},
		Attrs: map[string]string{}, BackendPolicies: map[int32][]string{}}
	for _, ld := range d.ListenerDescriptions {
		l := ld.Listener
		lb.Listeners = append(lb.Listeners, Listener{Protocol: aws.ToString(l.Protocol), Port: l.LoadBalancerPort,
			Cert: aws.ToString(l.SSLCertificateId), BackendProtocol: aws.ToString(l.InstanceProtocol), BackendPort: aws.ToInt32(l.InstancePort)})
	}
	sortListeners(lb.Listeners)
	for _, in := range d.Instances {
		lb.Instances = append(lb.Instances, aws.ToString(in.InstanceId))
	}
	sort.Strings(lb.Instances)
	if h := d.HealthCheck; h != nil {
		lb.HealthCheck = aws.ToString(h.Target)
		lb.HealthCheckTiming = fmt.Sprintf("%d/%d/%d/%d", aws.ToInt32(h.Interval), aws.ToInt32(h.Timeout), aws.ToInt32(h.HealthyThreshold), aws.ToInt32(h.UnhealthyThreshold))
	}
	for _, b := range d.BackendServerDescriptions {
		lb.BackendPolicies[aws.ToInt32(b.InstancePort)] = b.PolicyNames
	}
	attrs, err := cl.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(lb.Name)})
	if err != nil {
		return lb, fmt.Errorf("describing attributes of %s: %w", lb.Name, err)
	}
	if a := attrs.LoadBalancerAttributes; a != nil {
		if a.CrossZoneLoadBalancing != nil {
			lb.Attrs["cross_zone"] = fmt.Sprint(a.CrossZoneLoadBalancing.Enabled)
		}
		if a.ConnectionSettings != nil {
			lb.Attrs["idle_timeout"] = fmt.Sprint(aws.ToInt32(a.ConnectionSettings.IdleTimeout))
		}
		if d := a.ConnectionDraining; d != nil {
			lb.Attrs["draining"] = fmt.Sprintf("%v/%d", d.Enabled, aws.ToInt32(d.Timeout))
		}
		if l := a.AccessLog; l != nil {
			lb.Attrs["access_log"] = "false"
			if l.Enabled {
				lb.Attrs["access_log"] = fmt.Sprintf("true/%d/%s/%s", aws.ToInt32(l.EmitInterval), aws.ToString(l.S3BucketName), aws.ToString(l.S3BucketPrefix))
			}
		}
	}
	tags, err := cl.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{lb.Name}})
	if err != nil {
		return lb, fmt.Errorf("describing tags of %s: %w", lb.Name, err)
	}
	for _, td := range tags.TagDescriptions {
		for _, t := range td.Tags {
			lb.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	if len(d.SecurityGroups) > 0 {
		if lb.SecurityGroups, err = s.SecurityGroups(ctx, d.SecurityGroups...); err != nil {
			return lb, err
		}
	}
	return lb, nil
}

// describeV2 fills an ELBv2 load balancer's tags, attributes and listeners with their target
// groups.
func (s *Server) describeV2(ctx context.Context, v2 *elbv2.Client, lb *LoadBalancer) error {
	lb.Tags, lb.Attrs = map[string]string{}, map[string]string{}
	attrs, err := v2.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: aws.String(lb.ARN)})
	if err != nil {
		return fmt.Errorf("describing attributes of %s: %w", lb.Name, err)
	}
	for _, a := range attrs.Attributes {
		lb.Attrs[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	tags, err := v2.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{lb.ARN}})
	if err != nil {
		return fmt.Errorf("describing tags of %s: %w", lb.Name, err)
	}
	for _, td := range tags.TagDescriptions {
		for _, t := range td.Tags {
			lb.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	ls := elbv2.NewDescribeListenersPaginator(v2, &elbv2.DescribeListenersInput{LoadBalancerArn: aws.String(lb.ARN)})
	for ls.HasMorePages() {
		page, err := ls.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing listeners of %s: %w", lb.Name, err)
		}
		for _, li := range page.Listeners {
			l := Listener{Protocol: string(li.Protocol), Port: aws.ToInt32(li.Port)}
			if len(li.Certificates) > 0 {
				l.Cert = aws.ToString(li.Certificates[0].CertificateArn)
			}
			if len(li.DefaultActions) > 0 && li.DefaultActions[0].TargetGroupArn != nil {
				if err := s.describeTargetGroup(ctx, v2, aws.ToString(li.DefaultActions[0].TargetGroupArn), &l); err != nil {
					return fmt.Errorf("listener %d of %s: %w", l.Port, lb.Name, err)
				}
			}
			lb.Listeners = append(lb.Listeners, l)
		}
	}
	sortListeners(lb.Listeners)
	return nil
}

func (s *Server) describeTargetGroup(ctx context.Context, v2 *elbv2.Client, arn string, l *Listener) error {
	tgs, err := v2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{arn}})
	if err != nil {
		return fmt.Errorf("describing target group: %w", err)
	}
	if len(tgs.TargetGroups) > 0 {
		tg := tgs.TargetGroups[0]
		l.TargetGroup = aws.ToString(tg.TargetGroupName)
		l.BackendProtocol, l.BackendPort = string(tg.Protocol), aws.ToInt32(tg.Port)
		l.HealthCheck = string(tg.HealthCheckProtocol) + ":" + aws.ToString(tg.HealthCheckPort)
		if tg.HealthCheckProtocol == "HTTP" || tg.HealthCheckProtocol == "HTTPS" {
			l.HealthCheck += aws.ToString(tg.HealthCheckPath)
		}
		l.HealthCheckTiming = fmt.Sprintf("%d/%d/%d/%d", aws.ToInt32(tg.HealthCheckIntervalSeconds), aws.ToInt32(tg.HealthCheckTimeoutSeconds),
			aws.ToInt32(tg.HealthyThresholdCount), aws.ToInt32(tg.UnhealthyThresholdCount))
	}
	th, err := v2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)})
	if err != nil {
		return fmt.Errorf("describing targets: %w", err)
	}
	for _, d := range th.TargetHealthDescriptions {
		l.Targets = append(l.Targets, aws.ToString(d.Target.Id))
	}
	sort.Strings(l.Targets)
	ta, err := v2.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: aws.String(arn)})
	if err != nil {
		return fmt.Errorf("describing target group attributes: %w", err)
	}
	l.TargetGroupAttrs = map[string]string{}
	for _, a := range ta.Attributes {
		l.TargetGroupAttrs[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	return nil
}

func sortListeners(ls []Listener) {
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Port != ls[j].Port {
			return ls[i].Port < ls[j].Port
		}
		return ls[i].Protocol < ls[j].Protocol
	})
}

// SecurityGroups reads security groups by ID with their ingress rules (IPv4 ranges, IPv6 ranges,
// source groups, in that order within each permission), in the order given.
func (s *Server) SecurityGroups(ctx context.Context, ids ...string) ([]SecurityGroup, error) {
	out, err := ec2.NewFromConfig(s.harnessConfig()).DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: ids})
	if err != nil {
		return nil, fmt.Errorf("describing security groups %v: %w", ids, err)
	}
	byID := map[string]SecurityGroup{}
	for _, g := range out.SecurityGroups {
		sg := SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Tags: ec2Tags(g.Tags)}
		for _, p := range g.IpPermissions {
			for _, r := range p.IpRanges {
				sg.Rules = append(sg.Rules, SGRule{Protocol: aws.ToString(p.IpProtocol), FromPort: aws.ToInt32(p.FromPort),
					ToPort: aws.ToInt32(p.ToPort), CIDR: aws.ToString(r.CidrIp), Description: aws.ToString(r.Description)})
			}
			for _, r := range p.Ipv6Ranges {
				sg.Rules = append(sg.Rules, SGRule{Protocol: aws.ToString(p.IpProtocol), FromPort: aws.ToInt32(p.FromPort),
					ToPort: aws.ToInt32(p.ToPort), CIDR: aws.ToString(r.CidrIpv6), Description: aws.ToString(r.Description)})
			}
			for _, g := range p.UserIdGroupPairs {
				sg.Rules = append(sg.Rules, SGRule{Protocol: aws.ToString(p.IpProtocol), FromPort: aws.ToInt32(p.FromPort),
					ToPort: aws.ToInt32(p.ToPort), SourceGroup: aws.ToString(g.GroupId), Description: aws.ToString(g.Description)})
			}
		}
		byID[sg.ID] = sg
	}
	var groups []SecurityGroup
	for _, id := range ids {
		g, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("security group %s: not found", id)
		}
		groups = append(groups, g)
	}
	return groups, nil
}
