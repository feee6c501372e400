//go:build moto

package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/providers"
)

// TestHundredServicesMoto: 100 NLB and 100 Classic ELB Services (one port, default source
// ranges) all provision with the node security group far under the rules-per-group quota,
// every load balancer lets 0.0.0.0/0 in on its port through its own group and carries the
// backend group the node group lets in; after deleting them nothing tagged for the cluster is
// left and the node group holds none of Portico's rules.
func TestHundredServicesMoto(t *testing.T) {
	const perKind = 100
	f := seed(t, 3)
	p := f.provider(Classic)
	ctx := context.Background()
	var lbs []*providers.LoadBalancer
	for i := range perKind {
		for _, kind := range []Kind{NLB, Classic} {
			lb := testLB(fmt.Sprintf("%s%03d", kind, i), f.nodes)
			optsOf(lb).Kind = kind
			lb.Ports[0].NodePort = 30000 + int32(len(lbs))
			lbs = append(lbs, lb)
		}
	}
	start := time.Now()
	errs := ensureAll(t, p, lbs, 8)
	created := f.calls()
	t.Logf("%d Services ensured by 8 workers in %s, %s", len(lbs), time.Since(start).Round(time.Millisecond), perService(created, nil, len(lbs)))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Ensure(%s): %v", lbs[i].Ref, err)
		}
	}

	node := f.group(f.nodeSG)
	if n := ruleCount(node); n > maxRulesPerGroup/2 {
		t.Errorf("the node group holds %d rules for %d Services, want far under the quota of %d: %v", n, len(lbs), maxRulesPerGroup, f.nodeRules())
	}
	backend, err := p.backendGroup(ctx, f.vpc, false)
	must(t, err)
	if backend == "" || !hasBackendRule(node, backend) {
		t.Fatalf("the node group does not let the backend group %q in: %v", backend, f.nodeRules())
	}
	carried := f.groupsByLB()
	world := sgRule{Protocol: "tcp", From: 80, To: 80, CIDR: netip.MustParsePrefix("0.0.0.0/0")}
	for _, lb := range lbs {
		name := lbName(testCluster, lb.Ref, optsOf(lb).Kind, schemeInternetFacing)
		groups, ok := carried[name]
		if !ok {
			t.Errorf("%s: no load balancer %s", lb.Ref, name)
			continue
		}
		if !slices.Contains(groups, backend) {
			t.Errorf("%s: %s carries %v, not the backend group %s", lb.Ref, name, groups, backend)
		}
		own := f.group(f.groupID(securityGroupName(name, 0)))
		if !slices.Contains(groups, aws.ToString(own.GroupId)) {
			t.Errorf("%s: %s does not carry its own group %s", lb.Ref, name, aws.ToString(own.GroupId))
		}
		var found bool
		visit(own.IpPermissions, func(r sgRule, desc string) {
			if r.key() == world.key() && ruleOwner(desc) == lb.Ref.UID {
				found = true
			}
		})
		if !found {
			t.Errorf("%s: its group %s does not let 0.0.0.0/0 in on port 80", lb.Ref, aws.ToString(own.GroupId))
		}
	}

	// A node joins every Service: one register call per target group or Classic ELB, the
	// applied tag, and batched reads; the node group is not touched.
	added := f.addNode()
	addID, _ := instanceID(added.ProviderID)
	for _, lb := range lbs {
		lb.Nodes = f.nodes
	}
	before := f.calls()
	start = time.Now()
	for i, err := range ensureAll(t, p, lbs, 8) {
		if err != nil {
			t.Fatalf("Ensure(%s) with a node added: %v", lbs[i].Ref, err)
		}
	}
	t.Logf("a node added to %d Services in %s, %s", len(lbs), time.Since(start).Round(time.Millisecond), perService(f.calls(), before, len(lbs)))
	reads, writes := delta(before, f.calls())
	wantWrites := map[string]int{
		"Elastic Load Balancing v2:RegisterTargets":                perKind,
		"Elastic Load Balancing:RegisterInstancesWithLoadBalancer": perKind,
		"Elastic Load Balancing v2:AddTags":                        perKind,
		"Elastic Load Balancing:AddTags":                           perKind,
	}
	if !maps.Equal(writes, wantWrites) {
		t.Errorf("adding a node wrote %v, want %v", writes, wantWrites)
	}
	if n := total(reads); n > len(lbs)/2 {
		t.Errorf("adding a node made %d reads for %d Services: %v", n, len(lbs), reads)
	}
	for name, ids := range f.targetsByLB() {
		if !slices.Contains(ids, addID) {
			t.Errorf("%s lacks the added node: %v", name, ids)
		}
	}

	start = time.Now()
	var wg sync.WaitGroup
	work := make(chan *providers.LoadBalancer)
	for range 8 {
		wg.Go(func() {
			for lb := range work {
				deleteEventually(t, p, lb.Ref)
			}
		})
	}
	for _, lb := range lbs {
		work <- lb
	}
	close(work)
	wg.Wait()
	t.Logf("%d Services deleted by 8 workers in %s, %s", len(lbs), time.Since(start).Round(time.Millisecond), perService(f.calls(), created, len(lbs)))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after deleting every Service: %v", left)
	}
}

// deleteEventually calls Delete until it succeeds (a retry is what the controller does while
// a group is still attached to a load balancer being deleted).
func deleteEventually(t *testing.T, p *Provider, ref providers.Ref) {
	var err error
	for range 5 {
		if err = p.Delete(context.Background(), ref); err == nil {
			return
		}
		var retry *providers.RetryError
		if !errors.As(err, &retry) {
			break
		}
	}
	t.Errorf("Delete(%s): %v", ref, err)
}

// perService sums the provider's calls between two snapshots and divides by n.
func perService(after, before map[string]float64, n int) string {
	reads, writes := delta(before, after)
	return fmt.Sprintf("%.1f reads and %.1f writes per Service", float64(total(reads))/float64(n), float64(total(writes))/float64(n))
}

// backendGroup is the cluster's backend group in the fixture's VPC; the test fails without one.
func (f *fixture) backendGroup(p *Provider) string {
	id, err := p.backendGroup(context.Background(), f.vpc, false)
	must(f.t, err)
	if id == "" {
		f.t.Fatal("no backend security group")
	}
	return id
}

func ruleCount(g ec2types.SecurityGroup) int {
	n := 0
	visit(g.IpPermissions, func(sgRule, string) { n++ })
	return n
}

func (f *fixture) group(id string) ec2types.SecurityGroup {
	out, err := f.ec2.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	must(f.t, err)
	return out.SecurityGroups[0]
}

func (f *fixture) groupID(name string) string {
	out, err := f.ec2.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{{Name: aws.String("group-name"), Values: []string{name}}}})
	must(f.t, err)
	if len(out.SecurityGroups) != 1 {
		f.t.Fatalf("%d security groups named %s", len(out.SecurityGroups), name)
	}
	return aws.ToString(out.SecurityGroups[0].GroupId)
}

// targetsByLB returns the registered instances of every load balancer of both kinds, by name.
func (f *fixture) targetsByLB() map[string][]string {
	ctx := context.Background()
	out := map[string][]string{}
	c := elb.NewFromConfig(awsConfig(f.url))
	pager := elb.NewDescribeLoadBalancersPaginator(c, &elb.DescribeLoadBalancersInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		must(f.t, err)
		for _, lb := range page.LoadBalancerDescriptions {
			for _, in := range lb.Instances {
				out[aws.ToString(lb.LoadBalancerName)] = append(out[aws.ToString(lb.LoadBalancerName)], aws.ToString(in.InstanceId))
			}
		}
	}
	for name, v := range f.nlbs() {
		for _, ids := range v.Targets {
			out[name] = append(out[name], ids...)
		}
	}
	return out
}

// groupsByLB returns the security groups of every load balancer of both kinds, by name.
func (f *fixture) groupsByLB() map[string][]string {
	ctx := context.Background()
	out := map[string][]string{}
	pager := elb.NewDescribeLoadBalancersPaginator(elb.NewFromConfig(awsConfig(f.url)), &elb.DescribeLoadBalancersInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		must(f.t, err)
		for _, lb := range page.LoadBalancerDescriptions {
			out[aws.ToString(lb.LoadBalancerName)] = lb.SecurityGroups
		}
	}
	pager2 := elbv2.NewDescribeLoadBalancersPaginator(elbv2.NewFromConfig(awsConfig(f.url)), &elbv2.DescribeLoadBalancersInput{})
	for pager2.HasMorePages() {
		page, err := pager2.NextPage(ctx)
		must(f.t, err)
		for _, lb := range page.LoadBalancers {
			out[aws.ToString(lb.LoadBalancerName)] = lb.SecurityGroups
		}
	}
	return out
}
