package aws_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/e2e/moto"
)

// awsView reads what moto holds, with the harness's User-Agent (left out of moto.Calls).
type awsView struct {
	f     *moto.Fixture
	ec2   *ec2.Client
	elb   *elb.Client
	elbv2 *elbv2.Client
}

func newAWSView(srv *moto.Server, f *moto.Fixture) *awsView {
	cfg := srv.HarnessConfig()
	return &awsView{f: f, ec2: ec2.NewFromConfig(cfg), elb: elb.NewFromConfig(cfg), elbv2: elbv2.NewFromConfig(cfg)}
}

// lbView is one load balancer as moto holds it, reduced to what the tests compare.
type lbView struct {
	Kind   string // kindNLB or kindClassic
	Name   string
	ARN    string // NLB
	DNS    string
	Scheme string
	Tags   map[string]string
	// Listeners by "PROTO:port", e.g. "TCP_UDP:53", "TLS:443", "SSL:443" (Classic).
	Listeners map[string]listenerView
	// Attrs: NLB load-balancer attributes; Classic: "cross_zone" = "true"/"false".
	Attrs map[string]string
	// Classic: registered instances (sorted), health-check target, security groups, backend
	// policies by instance port.
	Instances      []string
	HealthCheck    string
	SecurityGroups []string
	BackendPolicy  map[int32][]string
}

// listenerView is one listener. For an NLB it carries its target group.
type listenerView struct {
	Port     int32
	Protocol string
	Cert     string
	// Backend: NLB target-group protocol and port; Classic instance port.
	BackendProtocol string
	BackendPort     int32
	// NLB only.
	TargetGroup string
	Targets     []string          // instance IDs, sorted
	HealthCheck string            // "HTTP:32000/healthz", "TCP:traffic-port"
	TGAttrs     map[string]string // proxy_protocol_v2.enabled ...
}

func (l *lbView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s dns=%s", l.Kind, l.Name, l.Scheme, l.DNS)
	keys := make([]string, 0, len(l.Listeners))
	for k := range l.Listeners {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ls := l.Listeners[k]
		fmt.Fprintf(&b, "\n  listener %s -> %s:%d cert=%q", k, ls.BackendProtocol, ls.BackendPort, ls.Cert)
		if l.Kind == kindNLB {
			fmt.Fprintf(&b, " tg=%s targets=%v hc=%s attrs=%v", ls.TargetGroup, ls.Targets, ls.HealthCheck, ls.TGAttrs)
		}
	}
	if l.Kind == kindClassic {
		fmt.Fprintf(&b, "\n  instances=%v hc=%s sgs=%v policies=%v", l.Instances, l.HealthCheck, l.SecurityGroups, l.BackendPolicy)
	}
	fmt.Fprintf(&b, "\n  attrs=%v tags=%v", l.Attrs, l.Tags)
	return b.String()
}

func ctx10() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// byDNS returns the load balancer whose DNS name is dns, or nil.
func (v *awsView) byDNS(dns string) (*lbView, error) {
	all, err := v.all()
	if err != nil {
		return nil, err
	}
	for _, l := range all {
		if l.DNS == dns {
			return v.detail(l)
		}
	}
	return nil, nil
}

// all lists every load balancer of both kinds (names, DNS, scheme only).
func (v *awsView) all() ([]*lbView, error) {
	ctx, cancel := ctx10()
	defer cancel()
	var out []*lbView
	v2, err := v.elbv2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	if err != nil {
		return nil, fmt.Errorf("describing NLBs: %w", err)
	}
	for _, l := range v2.LoadBalancers {
		out = append(out, &lbView{Kind: kindNLB, Name: aws.ToString(l.LoadBalancerName), ARN: aws.ToString(l.LoadBalancerArn), DNS: aws.ToString(l.DNSName), Scheme: string(l.Scheme),
			SecurityGroups: l.SecurityGroups})
	}
	cl, err := v.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	if err != nil {
		return nil, fmt.Errorf("describing Classic ELBs: %w", err)
	}
	for _, l := range cl.LoadBalancerDescriptions {
		out = append(out, &lbView{Kind: kindClassic, Name: aws.ToString(l.LoadBalancerName), DNS: aws.ToString(l.DNSName), Scheme: aws.ToString(l.Scheme)})
	}
	return out, nil
}

func (v *awsView) detail(l *lbView) (*lbView, error) {
	if l.Kind == kindNLB {
		return v.nlb(l)
	}
	return v.classic(l)
}

func (v *awsView) nlb(l *lbView) (*lbView, error) {
	ctx, cancel := ctx10()
	defer cancel()
	l.Listeners, l.Attrs, l.Tags = map[string]listenerView{}, map[string]string{}, map[string]string{}
	tags, err := v.elbv2.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{l.ARN}})
	if err != nil {
		return nil, fmt.Errorf("describing tags of %s: %w", l.Name, err)
	}
	for _, td := range tags.TagDescriptions {
		for _, t := range td.Tags {
			l.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	attrs, err := v.elbv2.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: &l.ARN})
	if err != nil {
		return nil, fmt.Errorf("describing attributes of %s: %w", l.Name, err)
	}
	for _, a := range attrs.Attributes {
		l.Attrs[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	ls, err := v.elbv2.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: &l.ARN})
	if err != nil {
		return nil, fmt.Errorf("describing listeners of %s: %w", l.Name, err)
	}
	for _, li := range ls.Listeners {
		lv := listenerView{Port: aws.ToInt32(li.Port), Protocol: string(li.Protocol), TGAttrs: map[string]string{}}
		if len(li.Certificates) > 0 {
			lv.Cert = aws.ToString(li.Certificates[0].CertificateArn)
		}
		if len(li.DefaultActions) > 0 && li.DefaultActions[0].TargetGroupArn != nil {
			arn := aws.ToString(li.DefaultActions[0].TargetGroupArn)
			tgs, err := v.elbv2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{arn}})
			if err != nil {
				return nil, fmt.Errorf("describing target group of %s:%d: %w", l.Name, lv.Port, err)
			}
			if len(tgs.TargetGroups) > 0 {
				tg := tgs.TargetGroups[0]
				lv.TargetGroup = aws.ToString(tg.TargetGroupName)
				lv.BackendProtocol, lv.BackendPort = string(tg.Protocol), aws.ToInt32(tg.Port)
				lv.HealthCheck = string(tg.HealthCheckProtocol) + ":" + aws.ToString(tg.HealthCheckPort)
				if tg.HealthCheckProtocol == "HTTP" || tg.HealthCheckProtocol == "HTTPS" {
					lv.HealthCheck += aws.ToString(tg.HealthCheckPath)
				}
			}
			th, err := v.elbv2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &arn})
			if err != nil {
				return nil, fmt.Errorf("describing targets of %s:%d: %w", l.Name, lv.Port, err)
			}
			for _, d := range th.TargetHealthDescriptions {
				lv.Targets = append(lv.Targets, aws.ToString(d.Target.Id))
			}
			lv.Targets = sortedCopy(lv.Targets)
			ta, err := v.elbv2.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: &arn})
			if err != nil {
				return nil, fmt.Errorf("describing target group attributes of %s:%d: %w", l.Name, lv.Port, err)
			}
			for _, a := range ta.Attributes {
				lv.TGAttrs[aws.ToString(a.Key)] = aws.ToString(a.Value)
			}
		}
		l.Listeners[fmt.Sprintf("%s:%d", lv.Protocol, lv.Port)] = lv
	}
	return l, nil
}

func (v *awsView) classic(l *lbView) (*lbView, error) {
	ctx, cancel := ctx10()
	defer cancel()
	l.Listeners, l.Attrs, l.Tags, l.BackendPolicy = map[string]listenerView{}, map[string]string{}, map[string]string{}, map[int32][]string{}
	out, err := v.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{l.Name}})
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", l.Name, err)
	}
	if len(out.LoadBalancerDescriptions) != 1 {
		return nil, fmt.Errorf("describing %s: %d results", l.Name, len(out.LoadBalancerDescriptions))
	}
	d := out.LoadBalancerDescriptions[0]
	for _, ld := range d.ListenerDescriptions {
		li := ld.Listener
		lv := listenerView{Port: li.LoadBalancerPort, Protocol: aws.ToString(li.Protocol), Cert: aws.ToString(li.SSLCertificateId),
			BackendProtocol: aws.ToString(li.InstanceProtocol), BackendPort: aws.ToInt32(li.InstancePort)}
		l.Listeners[fmt.Sprintf("%s:%d", lv.Protocol, lv.Port)] = lv
	}
	for _, in := range d.Instances {
		l.Instances = append(l.Instances, aws.ToString(in.InstanceId))
	}
	l.Instances = sortedCopy(l.Instances)
	if d.HealthCheck != nil {
		l.HealthCheck = aws.ToString(d.HealthCheck.Target)
	}
	l.SecurityGroups = d.SecurityGroups
	for _, b := range d.BackendServerDescriptions {
		l.BackendPolicy[aws.ToInt32(b.InstancePort)] = b.PolicyNames
	}
	attrs, err := v.elb.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: &l.Name})
	if err != nil {
		return nil, fmt.Errorf("describing attributes of %s: %w", l.Name, err)
	}
	if a := attrs.LoadBalancerAttributes; a != nil && a.CrossZoneLoadBalancing != nil {
		l.Attrs["cross_zone"] = fmt.Sprint(a.CrossZoneLoadBalancing.Enabled)
	}
	tags, err := v.elb.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{l.Name}})
	if err != nil {
		return nil, fmt.Errorf("describing tags of %s: %w", l.Name, err)
	}
	for _, td := range tags.TagDescriptions {
		for _, t := range td.Tags {
			l.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	return l, nil
}

// sourceCIDRs returns the client CIDRs the load balancer admits: the TCP rules of its security
// groups (a Classic ELB, an NLB created with groups); for an NLB without groups the node
// security group's rules the provider marked as the load balancer's client rules.
func (v *awsView) sourceCIDRs(l *lbView) ([]string, error) {
	ctx, cancel := ctx10()
	defer cancel()
	set := map[string]bool{}
	if l.Kind == kindClassic || len(l.SecurityGroups) > 0 {
		if len(l.SecurityGroups) == 0 {
			return nil, nil
		}
		out, err := v.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: l.SecurityGroups})
		if err != nil {
			return nil, err
		}
		for _, g := range out.SecurityGroups {
			for _, p := range g.IpPermissions {
				if aws.ToString(p.IpProtocol) != "tcp" {
					continue
				}
				for _, r := range p.IpRanges {
					set[aws.ToString(r.CidrIp)] = true
				}
			}
		}
	} else {
		out, err := v.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{v.f.NodeSecurityGroupID}})
		if err != nil {
			return nil, err
		}
		for _, g := range out.SecurityGroups {
			for _, p := range g.IpPermissions {
				for _, r := range p.IpRanges {
					if strings.HasSuffix(aws.ToString(r.Description), "/"+l.Name+"/client") {
						set[aws.ToString(r.CidrIp)] = true
					}
				}
			}
		}
	}
	var cidrs []string
	for c := range set {
		cidrs = append(cidrs, c)
	}
	return sortedCopy(cidrs), nil
}

// ownedNodeRules lists the node security group's rules the provider wrote (description
// "portico/..."), as "proto:from-to:source desc".
func (v *awsView) ownedNodeRules() []string {
	ctx, cancel := ctx10()
	defer cancel()
	out, err := v.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{v.f.NodeSecurityGroupID}})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var rules []string
	add := func(p ec2types.IpPermission, src, desc string) {
		if strings.HasPrefix(desc, "portico/") {
			rules = append(rules, fmt.Sprintf("%s:%d-%d:%s %s", aws.ToString(p.IpProtocol), aws.ToInt32(p.FromPort), aws.ToInt32(p.ToPort), src, desc))
		}
	}
	for _, g := range out.SecurityGroups {
		for _, p := range g.IpPermissions {
			for _, r := range p.IpRanges {
				add(p, aws.ToString(r.CidrIp), aws.ToString(r.Description))
			}
			for _, r := range p.Ipv6Ranges {
				add(p, aws.ToString(r.CidrIpv6), aws.ToString(r.Description))
			}
			for _, r := range p.UserIdGroupPairs {
				add(p, aws.ToString(r.GroupId), aws.ToString(r.Description))
			}
		}
	}
	return rules
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
