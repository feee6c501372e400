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

// securityGroupAPI manages the node groups' rules and the Classic ELBs' own groups.
type securityGroupAPI interface {
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error)
	AuthorizeSecurityGroupIngress(ctx context.Context, in *ec2.AuthorizeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupIngressOutput, error)
	RevokeSecurityGroupIngress(ctx context.Context, in *ec2.RevokeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.RevokeSecurityGroupIngressOutput, error)
}

var _ securityGroupAPI = (*ec2.Client)(nil)

func (p *Provider) sgAPI() securityGroupAPI { return p.ec2 }

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
	have := map[string]sgRule{}
	for _, r := range ownedRules(g.IpPermissions, func(desc string) bool { return ruleOwner(desc) == uid && ruleLB(desc) == lbName }) {
		have[r.key()] = r
	}
	// A rule the group already holds under another description (another Service's ICMP rule
	// from the same range, or one an admin added) already lets the traffic in: adding ours
	// would fail as a duplicate on every call.
	present := map[string]bool{}
	visit(g.IpPermissions, func(r sgRule, _ string) { present[r.key()] = true })
	var add []sgRule
	wanted := map[string]bool{}
	for _, r := range want {
		wanted[r.key()] = true
		if !present[r.key()] {
			add = append(add, r)
		}
	}
	var drop []sgRule
	for k, r := range have {
		if !wanted[k] {
			drop = append(drop, r)
		}
	}
	id := aws.ToString(g.GroupId)
	if len(add) > 0 {
		_, err := p.sgAPI().AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(id), IpPermissions: permissions(add, uid, lbName),
		})
		if isCode(err, "InvalidPermission.Duplicate") {
			// The same rule exists unmarked or for another Service; add ours one by one.
			err = p.authorizeEach(ctx, id, add, uid, lbName)
		}
		if err != nil {
			return fmt.Errorf("adding rules to security group %s: %w", id, err)
		}
	}
	if len(drop) > 0 {
		if err := p.revoke(ctx, id, drop, uid, lbName); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) authorizeEach(ctx context.Context, id string, rules []sgRule, uid, lbName string) error {
	for _, r := range rules {
		_, err := p.sgAPI().AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(id), IpPermissions: permissions([]sgRule{r}, uid, lbName),
		})
		if err != nil && !isCode(err, "InvalidPermission.Duplicate") {
			return err
		}
	}
	return nil
}

func (p *Provider) revoke(ctx context.Context, id string, rules []sgRule, uid, lbName string) error {
	_, err := p.sgAPI().RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{
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
			if err := p.revoke(ctx, aws.ToString(g.GroupId), rules, uid, lb); err != nil {
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
	pager := ec2.NewDescribeSecurityGroupsPaginator(p.sgAPI(), in)
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

// ensureOwnSecurityGroup finds or creates the Classic ELB's own group in vpc.
func (p *Provider) ensureOwnSecurityGroup(ctx context.Context, d desiredLB, vpc string) (ec2types.SecurityGroup, error) {
	name := securityGroupName(d.Name)
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("group-name"), Values: []string{name}},
		{Name: aws.String("vpc-id"), Values: []string{vpc}},
	}})
	if err != nil {
		return ec2types.SecurityGroup{}, err
	}
	if len(groups) > 0 {
		return groups[0], nil
	}
	out, err := p.sgAPI().CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName:   aws.String(name),
		Description: aws.String("Portico: Classic ELB " + d.Name + " for Service " + d.Tags[tagServiceName]),
		VpcId:       aws.String(vpc),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: toEC2Tags(d.Tags),
		}},
	})
	if err != nil {
		return ec2types.SecurityGroup{}, fmt.Errorf("creating security group %s: %w", name, err)
	}
	return ec2types.SecurityGroup{GroupId: out.GroupId, GroupName: aws.String(name), VpcId: aws.String(vpc)}, nil
}

// deleteOwnedSecurityGroups deletes the groups tagged as owned for ref (only lbName's when set).
// A group still attached to a load balancer being deleted asks for a retry.
func (p *Provider) deleteOwnedSecurityGroups(ctx context.Context, ref providers.Ref, lbName string) error {
	filters := []ec2Filter{
		{Name: aws.String("tag:" + clusterTag(p.cluster)), Values: []string{tagOwned}},
		{Name: aws.String("tag:" + tagServiceUID), Values: []string{ref.UID}},
	}
	if lbName != "" {
		filters = append(filters, ec2Filter{Name: aws.String("group-name"), Values: []string{securityGroupName(lbName)}})
	}
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
	if err != nil {
		return err
	}
	for _, g := range groups {
		_, err := p.sgAPI().DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId})
		switch {
		case isCode(err, "DependencyViolation"):
			return providers.RetryAfter(retryDetach, "security group %s is still in use while its load balancer is deleted", aws.ToString(g.GroupId))
		case err != nil && !isCode(err, "InvalidGroup.NotFound"):
			return fmt.Errorf("deleting security group %s: %w", aws.ToString(g.GroupId), err)
		}
	}
	return nil
}

func toEC2Tags(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func groupIDs(gs []ec2types.SecurityGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, aws.ToString(g.GroupId))
	}
	return out
}
