//go:build moto

package aws

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"

	"github.com/portico-lb/portico/annotations"
)

// TestClassicSourceRangeSplitMoto: 130 source ranges on a Classic ELB need 260 rules: five own
// groups, all attached and each let into the nodes; back to 10 ranges, the four groups no longer
// needed are detached and deleted.
func TestClassicSourceRangeSplitMoto(t *testing.T) {
	f := seed(t, 2)
	p := f.provider(annotations.AWSClassic)
	ctx := context.Background()
	lb := testLB("many", f.nodes)
	lb.SourceRanges = cidrs(130)
	ensure(t, p, lb)
	name := lbName(testCluster, lb.Ref, annotations.AWSClassic, schemeInternetFacing)

	check := func(wantGroups int) {
		t.Helper()
		own, err := f.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
			{Name: aws.String("tag:" + tagServiceUID), Values: []string{lb.Ref.UID}},
		}})
		must(t, err)
		var ids []string
		rules := map[string]bool{}
		for _, g := range own.SecurityGroups {
			ids = append(ids, aws.ToString(g.GroupId))
			var n int
			visit(g.IpPermissions, func(r sgRule, desc string) {
				n++
				rules[r.key()] = true
			})
			if n > maxRulesPerGroup {
				t.Errorf("group %s holds %d rules", aws.ToString(g.GroupName), n)
			}
		}
		slices.Sort(ids)
		if len(ids) != wantGroups {
			t.Errorf("%d owned groups, want %d", len(ids), wantGroups)
		}
		if want := 2 * len(lb.SourceRanges); len(rules) != want {
			t.Errorf("owned groups hold %d distinct rules, want %d", len(rules), want)
		}
		out, err := elb.NewFromConfig(awsConfig(f.url)).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
		must(t, err)
		if got := slices.Sorted(slices.Values(out.LoadBalancerDescriptions[0].SecurityGroups)); !slices.Equal(got, ids) {
			t.Errorf("ELB groups %v, want its owned groups %v", got, ids)
		}
		var fromGroups []string
		for _, r := range f.nodeRules() {
			if strings.HasPrefix(r, "-1:") {
				fromGroups = append(fromGroups, r)
			}
		}
		if len(fromGroups) != wantGroups {
			t.Errorf("node rules from the ELB's groups: %v, want %d", fromGroups, wantGroups)
		}
	}
	check(5)

	lb.SourceRanges = cidrs(10)
	ensure(t, p, lb)
	check(1)

	must(t, p.Delete(ctx, lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}

// TestNLBSourceRangeQuotaMoto: an NLB's client rules live in the nodes' own security group,
// which Portico does not split (it would have to attach groups to the instances); a list beyond
// the quota fails with an error that says so (moto enforces the 60-rule quota as AWS does).
func TestNLBSourceRangeQuotaMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.provider(annotations.AWSNLB)
	lb := testLB("wide", f.nodes)
	lb.Annotations.AWS.Type = annotations.AWSNLB
	lb.SourceRanges = cidrs(130)
	_, err := p.Ensure(context.Background(), lb)
	if err == nil || !strings.Contains(err.Error(), "rules-per-group quota") {
		t.Fatalf("Ensure with 130 source ranges on an NLB: %v, want the rules-per-group quota error", err)
	}
	must(t, p.Delete(context.Background(), lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}
