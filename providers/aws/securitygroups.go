package aws

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/portico-lb/portico/providers"
)

// nodeSecurityGroups returns, per distinct group, the security group of each backend instance
// the provider adds rules to: the instance's group tagged for this cluster, or its only group.
func (p *Provider) nodeSecurityGroups(ctx context.Context, insts []instance) ([]ec2types.SecurityGroup, error) {
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.Groups...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: ids})
	if err != nil {
		return nil, err
	}
	byID := map[string]ec2types.SecurityGroup{}
	for _, g := range groups {
		byID[aws.ToString(g.GroupId)] = g
	}
	chosen := map[string]bool{}
	for _, in := range insts {
		var pick string
		for _, id := range in.Groups {
			if _, ok := ec2Tags(byID[id].Tags)[clusterTag(p.cluster)]; ok {
				pick = id
				break
			}
		}
		if pick == "" && len(in.Groups) == 1 {
			pick = in.Groups[0]
		}
		if pick == "" {
			p.log.Info("Instance has several security groups and none tagged for the cluster; no rules added for it", "instance", in.ID, "tag", clusterTag(p.cluster))
			continue
		}
		chosen[pick] = true
	}
	var out []ec2types.SecurityGroup
	for _, g := range groups {
		if chosen[aws.ToString(g.GroupId)] {
			out = append(out, g)
		}
	}
	return out, nil
}

// reconcileRules makes the rules of group owned by (uid, lbName) exactly want: one Authorize
// for what is missing, one Revoke for what is left over, nothing when they agree.
func (p *Provider) reconcileRules(ctx context.Context, g ec2types.SecurityGroup, uid, lbName string, want []sgRule) error {
	return p.reconcileRuleSets(ctx, uid, lbName, []groupRules{{g, want}})
}

// groupRules is the rules one group should hold for a load balancer.
type groupRules struct {
	group ec2types.SecurityGroup
	want  []sgRule
}

// reconcileRuleSets converges several groups in three steps: revoke the rules no group should
// hold (making room under the rules-per-group quota), add every group's missing rules, then
// revoke the rules that moved to another group, so that a moving rule never lapses.
func (p *Provider) reconcileRuleSets(ctx context.Context, uid, lbName string, sets []groupRules) error {
	wantedAnywhere := map[string]bool{}
	for _, set := range sets {
		for _, r := range set.want {
			wantedAnywhere[r.key()] = true
		}
	}
	adds := make([][]sgRule, len(sets))
	moved := make([][]sgRule, len(sets))
	for i, set := range sets {
		var gone []sgRule
		add, drop := ruleDiff(set.group, uid, lbName, set.want)
		adds[i] = add
		for _, r := range drop {
			if wantedAnywhere[r.key()] {
				moved[i] = append(moved[i], r)
			} else {
				gone = append(gone, r)
			}
		}
		if len(gone) > 0 {
			if err := p.revokeOwned(ctx, set.group, gone, uid, lbName); err != nil {
				return err
			}
		}
	}
	for i, add := range adds {
		if len(add) == 0 {
			continue
		}
		id := aws.ToString(sets[i].group.GroupId)
		_, err := p.api.groups.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(id), IpPermissions: permissions(add, uid, lbName),
		})
		if isCode(err, "InvalidPermission.Duplicate") {
			// The same rule exists unmarked or for another Service; add ours one by one.
			err = p.authorizeEach(ctx, id, add, uid, lbName)
		}
		if isCode(err, "RulesPerSecurityGroupLimitExceeded") {
			return fmt.Errorf("adding %d rules to security group %s exceeds the account's rules-per-group quota (Portico assumes %d): raise the quota or shorten loadBalancerSourceRanges: %w", len(add), id, maxRulesPerGroup, err)
		}
		if err != nil {
			return fmt.Errorf("adding rules to security group %s: %w", id, err)
		}
	}
	for i, drop := range moved {
		if len(drop) > 0 {
			if err := p.revokeOwned(ctx, sets[i].group, drop, uid, lbName); err != nil {
				return err
			}
		}
	}
	return nil
}

// ruleDiff returns the rules group lacks and the rules owned by (uid, lbName) it should not hold.
func ruleDiff(g ec2types.SecurityGroup, uid, lbName string, want []sgRule) (add, drop []sgRule) {
	have := map[string]sgRule{}
	for _, r := range ownedRules(g.IpPermissions, func(desc string) bool { return ruleOwner(desc) == uid && ruleLB(desc) == lbName }) {
		have[r.key()] = r
	}
	// A rule the group already holds under another description (another Service's ICMP rule
	// from the same range, or one an admin added) already lets the traffic in: adding ours
	// would fail as a duplicate on every call.
	present := map[string]bool{}
	visit(g.IpPermissions, func(r sgRule, _ string) { present[r.key()] = true })
	wanted := map[string]bool{}
	for _, r := range want {
		wanted[r.key()] = true
		if !present[r.key()] {
			add = append(add, r)
		}
	}
	for _, k := range sortedKeys(have) {
		if !wanted[k] {
			drop = append(drop, have[k])
		}
	}
	return add, drop
}

func (p *Provider) authorizeEach(ctx context.Context, id string, rules []sgRule, uid, lbName string) error {
	for _, r := range rules {
		_, err := p.api.groups.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(id), IpPermissions: permissions([]sgRule{r}, uid, lbName),
		})
		if err != nil && !isCode(err, "InvalidPermission.Duplicate") {
			return err
		}
	}
	return nil
}

func (p *Provider) revoke(ctx context.Context, id string, rules []sgRule, uid, lbName string) error {
	_, err := p.api.groups.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{
		GroupId: aws.String(id), IpPermissions: permissions(rules, uid, lbName),
	})
	if err != nil && !isCode(err, "InvalidPermission.NotFound", "InvalidGroup.NotFound") {
		return fmt.Errorf("removing rules from security group %s: %w", id, err)
	}
	return nil
}

// revokeNodeRules removes, from every security group, the rules marked for uid (and lbName
// when set). Groups are scanned: rules are found by their description, wherever they are.
func (p *Provider) revokeNodeRules(ctx context.Context, uid, lbName string) error {
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil {
		return err
	}
	for _, g := range groups {
		for _, lb := range lbNamesOfRules(g.IpPermissions, uid) {
			if lbName != "" && lb != lbName {
				continue
			}
			rules := ownedRules(g.IpPermissions, func(desc string) bool { return ruleOwner(desc) == uid && ruleLB(desc) == lb })
			if err := p.revokeOwned(ctx, g, rules, uid, lb); err != nil {
				return err
			}
		}
	}
	return nil
}

// revokeOwned revokes rules owned by (uid, lbName) from g, except a rule another of the
// provider's load balancers relies on too, which is handed over to it instead: its description
// is rewritten to name the other owner, in place, so the traffic never stops. A rule holds one
// description, so when two Services need the same rule (the ICMP "fragmentation needed" rule
// from a source range both use) only one is its owner; the heir is found through its own rules
// from the same source.
func (p *Provider) revokeOwned(ctx context.Context, g ec2types.SecurityGroup, rules []sgRule, uid, lbName string) error {
	id := aws.ToString(g.GroupId)
	var gone []sgRule
	for _, r := range rules {
		heirUID, heirLB := heirOf(g.IpPermissions, r, uid, lbName)
		if heirUID == "" {
			gone = append(gone, r)
			continue
		}
		_, err := p.api.groups.UpdateSecurityGroupRuleDescriptionsIngress(ctx, &ec2.UpdateSecurityGroupRuleDescriptionsIngressInput{
			GroupId: aws.String(id), IpPermissions: permissions([]sgRule{r}, heirUID, heirLB),
		})
		if err != nil {
			return fmt.Errorf("handing rule %s in security group %s over to load balancer %s: %w", r.key(), id, heirLB, err)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return p.revoke(ctx, id, gone, uid, lbName)
}

// heirOf returns another owner (uid, load balancer) of the provider's rules in perms that needs
// r as well: for an ICMP MTU rule, one with a client rule from the same source. "" if none.
func heirOf(perms []ec2types.IpPermission, r sgRule, uid, lbName string) (string, string) {
	if r.Purpose != "mtu" {
		return "", ""
	}
	var heirUID, heirLB string
	visit(perms, func(x sgRule, desc string) {
		u, l := ruleOwner(desc), ruleLB(desc)
		if heirUID != "" || u == "" || l == "" || (u == uid && l == lbName) || x.Purpose != "client" || x.CIDR != r.CIDR || x.Group != r.Group {
			return
		}
		heirUID, heirLB = u, l
	})
	return heirUID, heirLB
}

// revokeStaleNodeRules revokes the rules owned by (uid, lbName; any of uid's load balancers
// when lbName is "") from groups that are not among current: the security group of a node that left, or that a node no longer has. filters find
// the candidates (groups with a rule on one of the load balancer's ports or from its groups).
func (p *Provider) revokeStaleNodeRules(ctx context.Context, uid, lbName, vpc string, current []ec2types.SecurityGroup, filters []ec2Filter) error {
	if vpc != "" {
		filters = append(filters, ec2Filter{Name: aws.String("vpc-id"), Values: []string{vpc}})
	}
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, g := range current {
		keep[aws.ToString(g.GroupId)] = true
	}
	for _, g := range groups {
		if keep[aws.ToString(g.GroupId)] {
			continue
		}
		for _, lb := range lbNamesOfRules(g.IpPermissions, uid) {
			if lbName != "" && lb != lbName {
				continue
			}
			rules := ownedRules(g.IpPermissions, func(desc string) bool { return ruleOwner(desc) == uid && ruleLB(desc) == lb })
			if err := p.revokeOwned(ctx, g, rules, uid, lb); err != nil {
				return err
			}
		}
	}
	return nil
}

func lbNamesOfRules(perms []ec2types.IpPermission, uid string) []string {
	var out []string
	visit(perms, func(_ sgRule, desc string) {
		if ruleOwner(desc) == uid {
			out = append(out, ruleLB(desc))
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// ownedRules flattens permissions into rules whose description satisfies mine.
func ownedRules(perms []ec2types.IpPermission, mine func(desc string) bool) []sgRule {
	var out []sgRule
	visit(perms, func(r sgRule, desc string) {
		if mine(desc) {
			out = append(out, r)
		}
	})
	return out
}

// visit calls fn for every source of every permission; the rule's Purpose is the description's
// last part, so that the rule renders back to the same description.
func visit(perms []ec2types.IpPermission, fn0 func(r sgRule, desc string)) {
	fn := func(r sgRule, desc string) {
		r.Purpose = desc[strings.LastIndex(desc, "/")+1:]
		fn0(r, desc)
	}
	for _, perm := range perms {
		base := sgRule{Protocol: aws.ToString(perm.IpProtocol), From: aws.ToInt32(perm.FromPort), To: aws.ToInt32(perm.ToPort)}
		if base.Protocol == "-1" {
			base.From, base.To = 0, 0
		}
		for _, r := range perm.IpRanges {
			x := base
			x.CIDR, _ = netip.ParsePrefix(aws.ToString(r.CidrIp))
			fn(x, aws.ToString(r.Description))
		}
		for _, r := range perm.Ipv6Ranges {
			x := base
			x.CIDR, _ = netip.ParsePrefix(aws.ToString(r.CidrIpv6))
			fn(x, aws.ToString(r.Description))
		}
		for _, r := range perm.UserIdGroupPairs {
			x := base
			x.Group = aws.ToString(r.GroupId)
			fn(x, aws.ToString(r.Description))
		}
	}
}

// permissions renders rules, one IpPermission each, described as owned by (uid, lbName).
func permissions(rules []sgRule, uid, lbName string) []ec2types.IpPermission {
	var out []ec2types.IpPermission
	for _, r := range rules {
		desc := aws.String(ruleDescription(uid, lbName, r.Purpose))
		perm := ec2types.IpPermission{IpProtocol: aws.String(r.Protocol)}
		if r.Protocol != "-1" {
			perm.FromPort, perm.ToPort = aws.Int32(r.From), aws.Int32(r.To)
		}
		switch {
		case r.Group != "":
			perm.UserIdGroupPairs = []ec2types.UserIdGroupPair{{GroupId: aws.String(r.Group), Description: desc}}
		case r.CIDR.Addr().Is6():
			perm.Ipv6Ranges = []ec2types.Ipv6Range{{CidrIpv6: aws.String(r.CIDR.String()), Description: desc}}
		default:
			perm.IpRanges = []ec2types.IpRange{{CidrIp: aws.String(r.CIDR.String()), Description: desc}}
		}
		out = append(out, perm)
	}
	return out
}

func (p *Provider) describeGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput) ([]ec2types.SecurityGroup, error) {
	var out []ec2types.SecurityGroup
	pager := ec2.NewDescribeSecurityGroupsPaginator(p.api.groups, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing security groups: %w", err)
		}
		out = append(out, page.SecurityGroups...)
	}
	return out, nil
}

// retryDetach is how long to wait for a load balancer to let go of its security group.
const retryDetach = 10 * time.Second

// ensureOwnSecurityGroup finds or creates the Classic ELB's first own group in vpc.
func (p *Provider) ensureOwnSecurityGroup(ctx context.Context, d desiredLB, vpc string) (ec2types.SecurityGroup, error) {
	groups, err := p.ensureOwnSecurityGroups(ctx, d, vpc, 1)
	if err != nil {
		return ec2types.SecurityGroup{}, err
	}
	return groups[0], nil
}

// ensureOwnSecurityGroups finds or creates the load balancer's n own groups in vpc (named
// securityGroupName(d.Name, i)), and returns them in order, followed by any further owned
// groups of the load balancer that are no longer needed (extra), which the caller detaches
// and deletes.
func (p *Provider) ensureOwnSecurityGroups(ctx context.Context, d desiredLB, vpc string, n int) (groups []ec2types.SecurityGroup, err error) {
	have, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("group-name"), Values: []string{securityGroupName(d.Name, 0), securityGroupName(d.Name, 0) + "-*"}},
		{Name: aws.String("vpc-id"), Values: []string{vpc}},
	}})
	if err != nil {
		return nil, err
	}
	byName := map[string]ec2types.SecurityGroup{}
	for _, g := range have {
		byName[aws.ToString(g.GroupName)] = g
	}
	for i := range n {
		name := securityGroupName(d.Name, i)
		if g, ok := byName[name]; ok {
			groups = append(groups, g)
			delete(byName, name)
			continue
		}
		out, err := p.api.groups.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName:   aws.String(name),
			Description: aws.String("Portico: " + kindName(d.Kind) + " " + d.Name + " for Service " + d.Tags[tagServiceName]),
			VpcId:       aws.String(vpc),
			TagSpecifications: []ec2types.TagSpecification{{
				ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: toEC2Tags(d.Tags),
			}},
		})
		if err != nil {
			return nil, fmt.Errorf("creating security group %s: %w", name, err)
		}
		groups = append(groups, ec2types.SecurityGroup{GroupId: out.GroupId, GroupName: aws.String(name), VpcId: aws.String(vpc)})
	}
	// Left over from a longer source-range list, if owned for this Service.
	for _, name := range sortedKeys(byName) {
		if g := byName[name]; ownedBy(ec2Tags(g.Tags), p.cluster, d.Tags[tagServiceUID]) {
			groups = append(groups, g)
		}
	}
	return groups, nil
}

// deleteSecurityGroup deletes one owned group; one still attached asks for a retry.
func (p *Provider) deleteSecurityGroup(ctx context.Context, id string) error {
	_, err := p.api.groups.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	switch {
	case isCode(err, "DependencyViolation"):
		return providers.RetryAfter(retryDetach, "security group %s is still in use while its load balancer lets go of it", id)
	case err != nil && !isCode(err, "InvalidGroup.NotFound"):
		return fmt.Errorf("deleting security group %s: %w", id, err)
	}
	return nil
}

// maxRulesPerGroup is AWS's default quota of inbound rules per security group ("Inbound or
// outbound rules per security group", 60 unless the account raised it). Each source (CIDR or
// group) of each protocol and port range counts as one rule.
const maxRulesPerGroup = 60

// maxClassicGroups and maxNLBGroups are the most security groups a Classic ELB and an NLB can
// have (AWS limits).
const (
	maxClassicGroups = 5
	maxNLBGroups     = 5
)

// convergeOwnGroups splits rules across the load balancer's own groups (ensureOwnSecurityGroups)
// and converges each group's rules. It returns the ids of the groups holding rules, in order,
// and the owned groups no longer needed, emptied, which the caller detaches and deletes.
func (p *Provider) convergeOwnGroups(ctx context.Context, ref providers.Ref, d desiredLB, vpc string, rules []sgRule) (attach []string, extra []ec2types.SecurityGroup, err error) {
	chunks := splitRules(rules, maxRulesPerGroup)
	own, err := p.ensureOwnSecurityGroups(ctx, d, vpc, len(chunks))
	if err != nil {
		return nil, nil, err
	}
	sets := make([]groupRules, len(own))
	for i, g := range own {
		sets[i].group = g
		if i < len(chunks) {
			sets[i].want = chunks[i]
			attach = append(attach, aws.ToString(g.GroupId))
		} else {
			extra = append(extra, g)
		}
	}
	if err := p.reconcileRuleSets(ctx, ref.UID, d.Name, sets); err != nil {
		return nil, nil, err
	}
	return attach, extra, nil
}

// deleteOwnedSecurityGroups deletes the groups tagged as owned for ref (only lbName's when set).
// A group still attached to a load balancer being deleted asks for a retry.
func (p *Provider) deleteOwnedSecurityGroups(ctx context.Context, ref providers.Ref, lbName string) error {
	filters := []ec2Filter{
		{Name: aws.String("tag:" + clusterTag(p.cluster)), Values: []string{tagOwned}},
		{Name: aws.String("tag:" + tagServiceUID), Values: []string{ref.UID}},
	}
	if lbName != "" {
		filters = append(filters, ec2Filter{Name: aws.String("group-name"), Values: []string{securityGroupName(lbName, 0), securityGroupName(lbName, 0) + "-*"}})
	}
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
	if err != nil || len(groups) == 0 {
		return err
	}
	// Rules letting these groups in (an older Portico's node rules for a Classic ELB) go first.
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = aws.ToString(g.GroupId)
	}
	if err := p.revokeStaleNodeRules(ctx, ref.UID, lbName, "", nil, []ec2Filter{{Name: aws.String("ip-permission.group-id"), Values: ids}}); err != nil {
		return err
	}
	for _, g := range groups {
		_, err := p.api.groups.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId})
		switch {
		case isCode(err, "DependencyViolation"):
			return providers.RetryAfter(retryDetach, "security group %s is still in use while its load balancer is deleted", aws.ToString(g.GroupId))
		case err != nil && !isCode(err, "InvalidGroup.NotFound"):
			return fmt.Errorf("deleting security group %s: %w", aws.ToString(g.GroupId), err)
		}
	}
	return nil
}
