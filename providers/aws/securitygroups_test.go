package aws

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
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
	off := false // no backend group: five groups are free for the source ranges
	optsOf(lb).ManageBackendSecurityGroupRules = &off
	d, err := modelProvider(Classic).desired(lb)
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
		unmanaged    bool // manage-backend-security-group-rules: false (no backend group)
		ok           bool
	}{
		{120, 0, false, true},  // 240 rules, 4 groups + the backend group
		{121, 0, false, false}, // 5 groups + the backend group
		{90, 1, false, true},   // 3 groups + 1 extra + the backend group
		{91, 1, false, false},  // 4 groups + 1 extra + the backend group
		{150, 0, true, true},   // 300 rules, 5 groups
		{151, 0, true, false},  // 6 groups
	} {
		lb := testLB("web", nil)
		lb.SourceRanges = cidrs(tc.cidrs)
		if tc.unmanaged {
			off := false
			optsOf(lb).ManageBackendSecurityGroupRules = &off
		}
		for i := range tc.extra {
			optsOf(lb).ExtraSecurityGroups = append(optsOf(lb).ExtraSecurityGroups, fmt.Sprintf("sg-%d", i))
		}
		_, err := modelProvider(Classic).desired(lb)
		if tc.ok != (err == nil) {
			t.Errorf("%d source ranges, %d extra groups, unmanaged %v: error %v, want ok=%v", tc.cidrs, tc.extra, tc.unmanaged, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "at most 5 groups") {
			t.Errorf("error %q does not say the limit", err)
		}
	}
}

func TestNLBGroupLimit(t *testing.T) {
	for _, tc := range []struct {
		cidrs int
		ok    bool
	}{
		{120, true},  // 240 rules, 4 groups + the backend group
		{121, false}, // 5 groups + the backend group
	} {
		lb := testLB("web", nil)
		optsOf(lb).Kind = NLB
		lb.SourceRanges = cidrs(tc.cidrs)
		_, err := modelProvider(NLB).desired(lb)
		if tc.ok != (err == nil) {
			t.Errorf("%d source ranges: error %v, want ok=%v", tc.cidrs, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "at most 5 groups") {
			t.Errorf("error %q does not say the limit", err)
		}
	}
}

func TestLBNameOfARN(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/k8s-web-0123456789abcdef0123/50dc6c495c0c9188": "k8s-web-0123456789abcdef0123",
		"arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/x/7e8cbc3c16dd3eb0":                            "x",
		"not-an-arn": "",
	} {
		if got := lbNameOfARN(arn); got != want {
			t.Errorf("lbNameOfARN(%q) = %q, want %q", arn, got, want)
		}
	}
}
