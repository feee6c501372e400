package moto

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
)

// Kind is a kind of AWS resource in an Inventory.
type Kind string

// The kinds Owned lists.
const (
	KindClassicLB     Kind = "classic-elb"    // ID and Name: the load balancer name
	KindLoadBalancer  Kind = "elbv2"          // ID: ARN; Name: load balancer name
	KindTargetGroup   Kind = "target-group"   // ID: ARN; Name: target group name
	KindListener      Kind = "listener"       // ID: ARN; Name: "<LB name>/<LB id>:<port>"
	KindSecurityGroup Kind = "security-group" // ID: sg-...; Name: group name
	KindAddress       Kind = "eip"            // ID: eipalloc-...; Name: public IP
)

// Resource is one AWS resource in an Inventory.
type Resource struct {
	Kind Kind
	ID   string
	Name string
	Tags map[string]string // nil for listeners
}

func (r Resource) String() string { return fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, r.ID) }

// Inventory is a list of resources, sorted by kind, name and ID.
type Inventory []Resource

// Of returns the resources of one kind.
func (inv Inventory) Of(k Kind) Inventory {
	var out Inventory
	for _, r := range inv {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// Duplicates returns, for each (kind, name) held by more than one resource, a line naming
// them. moto accepts duplicate NLB and target-group names, so this is how a test proves
// "no duplicates".
func (inv Inventory) Duplicates() []string {
	byName := map[string][]string{}
	var keys []string
	for _, r := range inv {
		k := string(r.Kind) + " " + r.Name
		if byName[k] == nil {
			keys = append(keys, k)
		}
		byName[k] = append(byName[k], r.ID)
	}
	var out []string
	for _, k := range keys {
		if ids := byName[k]; len(ids) > 1 {
			out = append(out, fmt.Sprintf("%s: %s", k, strings.Join(ids, ", ")))
		}
	}
	return out
}

// String lists the resources one per line.
func (inv Inventory) String() string {
	lines := make([]string, len(inv))
	for i, r := range inv {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

// Owned lists every Classic ELB, ELBv2 load balancer, target group, security group and
// Elastic IP tagged kubernetes.io/cluster/<cluster>=owned, and every listener of those ELBv2
// load balancers, leaving out what Seed created. Its requests are not counted by Calls.
func (s *Server) Owned(t testing.TB, cluster string) Inventory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inv, err := s.OwnedContext(ctx, cluster)
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	return inv
}

// OwnedContext is Owned outside a test (the demo).
func (s *Server) OwnedContext(ctx context.Context, cluster string) (Inventory, error) {
	var inv Inventory
	var err error
	// A resource deleted between its listing and the next call (the code under test runs
	// meanwhile) answers NotFound: take the snapshot again.
	for range 5 {
		inv, err = s.owned(ctx, cluster)
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || !strings.HasSuffix(apiErr.ErrorCode(), "NotFound") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing owned resources: %w", err)
	}
	return inv, nil
}

func (s *Server) owned(ctx context.Context, cluster string) (Inventory, error) {
	cfg := s.harnessConfig()
	key := ClusterTag(cluster)
	owned := func(tags map[string]string) bool { return tags[key] == "owned" }
	var inv Inventory
	add := func(r Resource) {
		if !s.isSeeded(r.ID) {
			inv = append(inv, r)
		}
	}

	// EC2: security groups and addresses, filtered by tag on the server.
	ec := ec2.NewFromConfig(cfg)
	filter := []ec2types.Filter{{Name: aws.String("tag:" + key), Values: []string{"owned"}}}
	sgs := ec2.NewDescribeSecurityGroupsPaginator(ec, &ec2.DescribeSecurityGroupsInput{Filters: filter})
	for sgs.HasMorePages() {
		page, err := sgs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing security groups: %w", err)
		}
		for _, g := range page.SecurityGroups {
			add(Resource{Kind: KindSecurityGroup, ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Tags: ec2Tags(g.Tags)})
		}
	}
	addrs, err := ec.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: filter})
	if err != nil {
		return nil, fmt.Errorf("describing addresses: %w", err)
	}
	for _, a := range addrs.Addresses {
		add(Resource{Kind: KindAddress, ID: aws.ToString(a.AllocationId), Name: aws.ToString(a.PublicIp), Tags: ec2Tags(a.Tags)})
	}

	// Classic ELB: list all, then tags in batches of 20 names.
	cl := elb.NewFromConfig(cfg)
	var classic []string
	lbs := elb.NewDescribeLoadBalancersPaginator(cl, &elb.DescribeLoadBalancersInput{})
	for lbs.HasMorePages() {
		page, err := lbs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing classic load balancers: %w", err)
		}
		for _, lb := range page.LoadBalancerDescriptions {
			classic = append(classic, aws.ToString(lb.LoadBalancerName))
		}
	}
	for _, batch := range batches(classic, 20) {
		out, err := cl.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: batch})
		if err != nil {
			return nil, fmt.Errorf("describing classic load balancer tags: %w", err)
		}
		for _, d := range out.TagDescriptions {
			tags := map[string]string{}
			for _, tg := range d.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			if owned(tags) {
				name := aws.ToString(d.LoadBalancerName)
				add(Resource{Kind: KindClassicLB, ID: name, Name: name, Tags: tags})
			}
		}
	}

	// ELBv2: load balancers and target groups, tags in batches of 20 ARNs.
	v2 := elbv2.NewFromConfig(cfg)
	names := map[string]string{} // ARN -> name
	var lbARNs, tgARNs []string
	v2lbs := elbv2.NewDescribeLoadBalancersPaginator(v2, &elbv2.DescribeLoadBalancersInput{})
	for v2lbs.HasMorePages() {
		page, err := v2lbs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing load balancers: %w", err)
		}
		for _, lb := range page.LoadBalancers {
			arn := aws.ToString(lb.LoadBalancerArn)
			lbARNs = append(lbARNs, arn)
			names[arn] = aws.ToString(lb.LoadBalancerName)
		}
	}
	tgs := elbv2.NewDescribeTargetGroupsPaginator(v2, &elbv2.DescribeTargetGroupsInput{})
	seenTG := map[string]bool{} // moto can list a target group twice
	for tgs.HasMorePages() {
		page, err := tgs.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing target groups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			arn := aws.ToString(tg.TargetGroupArn)
			if !seenTG[arn] {
				seenTG[arn] = true
				tgARNs = append(tgARNs, arn)
				names[arn] = aws.ToString(tg.TargetGroupName)
			}
		}
	}
	ownedLBs := map[string]bool{}
	for _, batch := range batches(append(append([]string{}, lbARNs...), tgARNs...), 20) {
		out, err := v2.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: batch})
		if err != nil {
			return nil, fmt.Errorf("describing load balancer tags: %w", err)
		}
		for _, d := range out.TagDescriptions {
			tags := map[string]string{}
			for _, tg := range d.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			if !owned(tags) {
				continue
			}
			arn := aws.ToString(d.ResourceArn)
			kind := KindTargetGroup
			if strings.Contains(arn, ":loadbalancer/") {
				kind = KindLoadBalancer
				ownedLBs[arn] = true
			}
			add(Resource{Kind: kind, ID: arn, Name: names[arn], Tags: tags})
		}
	}
	for _, arn := range lbARNs {
		if !ownedLBs[arn] {
			continue
		}
		ls := elbv2.NewDescribeListenersPaginator(v2, &elbv2.DescribeListenersInput{LoadBalancerArn: aws.String(arn)})
		for ls.HasMorePages() {
			page, err := ls.NextPage(ctx)
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode() == "LoadBalancerNotFound" {
				// Deleted since it was listed (the code under test runs meanwhile): the
				// snapshot keeps the load balancer, without listeners.
				break
			}
			if err != nil {
				return nil, fmt.Errorf("describing listeners of %s: %w", names[arn], err)
			}
			for _, l := range page.Listeners {
				add(Resource{Kind: KindListener, ID: aws.ToString(l.ListenerArn), Name: fmt.Sprintf("%s/%s:%d", names[arn], arn[strings.LastIndexByte(arn, '/')+1:], aws.ToInt32(l.Port))})
			}
		}
	}

	sort.Slice(inv, func(i, j int) bool {
		a, b := inv[i], inv[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return inv, nil
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func batches(s []string, n int) [][]string {
	var out [][]string
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}
