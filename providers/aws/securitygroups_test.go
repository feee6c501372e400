package aws

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"

	"github.com/portico-lb/portico/annotations"
)

func cidrs(n int) []netip.Prefix {
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(100 + i/250), byte(i % 250)}), 32)
	}
	return out
}

func TestSplitRules(t *testing.T) {
	lb := testLB("web", nil)
	lb.SourceRanges = cidrs(130)
	d, err := modelProvider(annotations.AWSClassic).desired(lb)
	if err != nil {
		t.Fatal(err)
	}
	rules := classicRules(d) // 130 CIDRs x (port 80 + ICMP) = 260 rules
	chunks := splitRules(rules, maxRulesPerGroup)
	if len(chunks) != 5 {
		t.Fatalf("260 rules in %d groups, want 5", len(chunks))
	}
	var all []string
	for i, c := range chunks {
		if len(c) > maxRulesPerGroup {
			t.Errorf("group %d holds %d rules", i, len(c))
		}
		srcs := map[string]int{}
		for _, r := range c {
			all = append(all, r.key())
			srcs[r.CIDR.String()]++
		}
		for src, n := range srcs {
			if n != 2 {
				t.Errorf("group %d holds %d of %s's 2 rules: a source's rules belong together", i, n, src)
			}
		}
	}
	var want []string
	for _, r := range rules {
		want = append(want, r.key())
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("the groups do not hold exactly the rules")
	}
	slices.Reverse(rules)
	again := splitRules(rules, maxRulesPerGroup)
	for i := range chunks {
		if chunks[i][0].key() != again[i][0].key() {
			t.Errorf("group %d starts with %s, then with %s: the split depends on the input order", i, chunks[i][0].key(), again[i][0].key())
		}
	}

	// One source with more rules than a group holds is split too.
	var many []sgRule
	for port := range int32(70) {
		many = append(many, sgRule{Protocol: "tcp", From: 30000 + port, To: 30000 + port, CIDR: netip.MustParsePrefix("198.18.0.0/24")})
	}
	if got := splitRules(many, 60); len(got) != 2 || len(got[0]) != 60 || len(got[1]) != 10 {
		t.Errorf("70 rules of one source: groups of %d", lens(got))
	}
	if got := splitRules(nil, 60); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("no rules: %v, want one empty group", got)
	}
}

func lens(chunks [][]sgRule) []int {
	var out []int
	for _, c := range chunks {
		out = append(out, len(c))
	}
	return out
}

func TestClassicGroupLimit(t *testing.T) {
	for _, tc := range []struct {
		cidrs, extra int
		ok           bool
	}{
		{150, 0, true},  // 300 rules, 5 groups
		{151, 0, false}, // 6 groups
		{120, 1, true},  // 4 groups + 1 extra
		{130, 1, false}, // 5 groups + 1 extra
	} {
		lb := testLB("web", nil)
		lb.SourceRanges = cidrs(tc.cidrs)
		for i := range tc.extra {
			lb.Annotations.AWS.ExtraSecurityGroups = append(lb.Annotations.AWS.ExtraSecurityGroups, fmt.Sprintf("sg-%d", i))
		}
		_, err := modelProvider(annotations.AWSClassic).desired(lb)
		if tc.ok != (err == nil) {
			t.Errorf("%d source ranges, %d extra groups: error %v, want ok=%v", tc.cidrs, tc.extra, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "at most 5 groups") {
			t.Errorf("error %q does not say the limit", err)
		}
	}
}

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
