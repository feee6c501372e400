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

	"github.com/portico-lb/portico/providers"
)

// TestClassicSourceRangeSplitMoto: 110 source ranges on a Classic ELB need 220 rules: four own
// groups, all attached with the backend group; the node group lets in the backend group alone.
// Back to 10 ranges, the three groups no longer needed are detached and deleted.
func TestClassicSourceRangeSplitMoto(t *testing.T) {
	f := seed(t, 2)
	p := f.provider(Classic)
	ctx := context.Background()
	lb := testLB("many", f.nodes)
	lb.SourceRanges = cidrs(110)
	ensure(t, p, lb)
	name := lbName(testCluster, lb.Ref, Classic, schemeInternetFacing)
	backend := f.backendGroup(p)

	check := func(wantGroups int) {
		t.Helper()
		ids := f.checkOwnGroups(lb.Ref.UID, 2*len(lb.SourceRanges), wantGroups)
		out, err := elb.NewFromConfig(awsConfig(f.url)).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
		must(t, err)
		if got, want := slices.Sorted(slices.Values(out.LoadBalancerDescriptions[0].SecurityGroups)), slices.Sorted(slices.Values(append(ids, backend))); !slices.Equal(got, want) {
			t.Errorf("ELB groups %v, want its owned groups and the backend group %v", got, want)
		}
		if got, want := f.nodeRules(), []string{"-1:0-0<-" + backend + " (traffic)"}; !slices.Equal(got, want) {
			t.Errorf("node rules %v, want %v", got, want)
		}
	}
	check(4)

	lb.SourceRanges = cidrs(10)
	ensure(t, p, lb)
	check(1)

	must(t, p.Delete(ctx, lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}

// checkOwnGroups checks the security groups tagged for uid: want groups of at most the quota,
// holding rules distinct rules between them; it returns their IDs.
func (f *fixture) checkOwnGroups(uid string, rules, want int) []string {
	f.t.Helper()
	own, err := f.ec2.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("tag:" + tagServiceUID), Values: []string{uid}},
	}})
	must(f.t, err)
	var ids []string
	distinct := map[string]bool{}
	for _, g := range own.SecurityGroups {
		ids = append(ids, aws.ToString(g.GroupId))
		var n int
		visit(g.IpPermissions, func(r sgRule, desc string) {
			n++
			distinct[r.key()] = true
		})
		if n > maxRulesPerGroup {
			f.t.Errorf("group %s holds %d rules", aws.ToString(g.GroupName), n)
		}
	}
	slices.Sort(ids)
	if len(ids) != want {
		f.t.Errorf("%d owned groups, want %d", len(ids), want)
	}
	if len(distinct) != rules {
		f.t.Errorf("owned groups hold %d distinct rules, want %d", len(distinct), rules)
	}
	return ids
}

// TestNLBSourceRangeSplitMoto: an NLB's source ranges are rules in its own groups, split as a
// Classic ELB's: 110 ranges on two ports need 330 rules, six groups; an NLB takes five with the
// backend group, so that is refused before anything is created. 110 ranges on one port (220
// rules) take four groups, attached with the backend group.
func TestNLBSourceRangeSplitMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.provider(NLB)
	ctx := context.Background()
	lb := testLB("wide", f.nodes)
	optsOf(lb).Kind = NLB
	lb.SourceRanges = cidrs(110)
	lb.Ports = append(lb.Ports, providers.Port{Name: "alt", Protocol: providers.TCP, Port: 8080, NodePort: 30808})
	if _, err := p.Ensure(ctx, lb); err == nil || !strings.Contains(err.Error(), "at most 5 groups") {
		t.Fatalf("Ensure with 110 source ranges on two ports: %v, want the groups-per-NLB error", err)
	}
	if left := f.owned(); len(left) != 0 {
		t.Errorf("a refused Service created %v", left)
	}
	lb.Ports = lb.Ports[:1]
	ensure(t, p, lb)
	ids := f.checkOwnGroups(lb.Ref.UID, 2*len(lb.SourceRanges), 4)
	backend := f.backendGroup(p)
	if got, want := f.groupsByLB()[lbName(testCluster, lb.Ref, NLB, schemeInternetFacing)], slices.Sorted(slices.Values(append(ids, backend))); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("NLB groups %v, want %v", got, want)
	}
	must(t, p.Delete(ctx, lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}

// TestNLBSourceRangeQuotaMoto: an NLB created without security groups (by an older Portico)
// keeps its client rules in the nodes' own security group, which Portico does not split (it
// would have to attach groups to the instances); a list beyond the quota fails with an error
// that says so (moto enforces the 60-rule quota as AWS does).
func TestNLBSourceRangeQuotaMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.legacyProvider(NLB)
	lb := testLB("wide", f.nodes)
	optsOf(lb).Kind = NLB
	lb.SourceRanges = cidrs(100)
	_, err := p.Ensure(context.Background(), lb)
	if err == nil || !strings.Contains(err.Error(), "rules-per-group quota") {
		t.Fatalf("Ensure with 100 source ranges on an NLB without groups: %v, want the rules-per-group quota error", err)
	}
	must(t, p.Delete(context.Background(), lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}
