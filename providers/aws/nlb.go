package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// describeTagsBatch is the most resources one ELBv2 DescribeTags call takes.
const describeTagsBatch = 20

// ensureNLB converges the NLB of d: found (and adopted: tags, subnets, address type) or created,
// then its listeners and target groups, its attributes, and its security: its own groups when
// it has them, per-Service node rules when it is an NLB without groups.
func (p *Provider) ensureNLB(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*lbRecord, error) {
	rec, err := p.findOrCreateNLB(ctx, ref, d, insts)
	if err != nil {
		return nil, err
	}
	if err := p.reconcileListeners(ctx, d, rec, rec.VPC, instanceIDsOf(insts)); err != nil {
		return nil, err
	}
	if err := p.reconcileNLBAttributes(ctx, d, rec); err != nil {
		return nil, err
	}
	subnets, err := p.subnetsByID(ctx, rec.Subnets)
	if err != nil {
		return nil, err
	}
	if len(rec.SecurityGroups) > 0 {
		err = p.reconcileNLBSecurity(ctx, ref, d, rec, insts)
	} else {
		err = p.reconcileNLBNodeRules(ctx, ref, d, rec, insts, subnets)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// findOrCreateNLB returns the record of d's NLB: the existing one, owned by ref and brought to
// d's tags, subnets and address type, or a new one.
func (p *Provider) findOrCreateNLB(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*lbRecord, error) {
	cur, err := p.findNLB(ctx, d.Name)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return p.createNLB(ctx, ref, d, insts)
	}
	tags, err := p.nlbTags(ctx, []string{aws.ToString(cur.LoadBalancerArn)})
	if err != nil {
		return nil, err
	}
	rec := nlbRecord(cur, tags[aws.ToString(cur.LoadBalancerArn)])
	if !ownedBy(rec.Tags, p.cluster, ref.UID) {
		if !adoptable(d.Name, rec.Tags, p.cluster, ref) {
			return nil, fmt.Errorf("load balancer %s exists but is not tagged as owned by Service %s (uid %s) of cluster %s; not touching it", d.Name, ref, ref.UID, p.cluster)
		}
		p.log.Info("Adopting the NLB of cloud-provider-aws", "service", ref, "name", d.Name)
	}
	if err := p.tagNLB(ctx, rec, d.Tags); err != nil {
		return nil, err
	}
	if err := p.reconcileNLBSubnets(ctx, d, rec); err != nil {
		return nil, err
	}
	if err := p.reconcileNLBAddressType(ctx, d, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// reconcileNLBSubnets moves an existing NLB to the subnets the Service names, if it names any.
func (p *Provider) reconcileNLBSubnets(ctx context.Context, d desiredLB, rec *lbRecord) error {
	if len(d.Subnets) == 0 {
		return nil
	}
	want, err := p.namedSubnets(ctx, d.Subnets)
	if err != nil {
		return err
	}
	if !slices.Equal(subnetIDs(want), rec.Subnets) {
		if _, err := p.api.nlb.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: aws.String(rec.ARN), Subnets: subnetIDs(want)}); err != nil {
			return fmt.Errorf("setting subnets of %s: %w", d.Name, err)
		}
		rec.Subnets = subnetIDs(want)
	}
	return nil
}

// reconcileNLBAddressType sets an existing NLB's address type (ipv4 or dualstack).
func (p *Provider) reconcileNLBAddressType(ctx context.Context, d desiredLB, rec *lbRecord) error {
	if rec.IPAddressType == d.NLB.IPAddressType {
		return nil
	}
	if _, err := p.api.nlb.SetIpAddressType(ctx, &elbv2.SetIpAddressTypeInput{LoadBalancerArn: aws.String(rec.ARN), IpAddressType: elbv2types.IpAddressType(d.NLB.IPAddressType)}); err != nil {
		return fmt.Errorf("setting the address type of %s to %s: %w", d.Name, d.NLB.IPAddressType, err)
	}
	rec.IPAddressType = d.NLB.IPAddressType
	return nil
}

// reconcileNLBNodeRules converges an NLB without security groups (created so by an older
// Portico): per-Service rules in the nodes' groups, as cloud-provider-aws writes them, and the
// removal of such rules from groups no node uses any more.
func (p *Provider) reconcileNLBNodeRules(ctx context.Context, ref providers.Ref, d desiredLB, rec *lbRecord, insts []instance, subnets []subnet) error {
	if !d.ManageNodeRules {
		return nil
	}
	groups, err := p.nodeSecurityGroups(ctx, insts)
	if err != nil {
		return err
	}
	rules := nlbNodeRules(d, subnetCIDRs(subnets))
	for _, g := range groups {
		if err := p.reconcileRules(ctx, g, ref.UID, d.Name, rules); err != nil {
			return err
		}
	}
	// Groups holding rules on this load balancer's node ports that no node uses any more.
	var ports []string
	for _, r := range rules {
		if r.Purpose != "mtu" {
			ports = append(ports, itoa(r.From))
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	return p.revokeStaleNodeRules(ctx, ref.UID, d.Name, rec.VPC, groups, []ec2Filter{{Name: aws.String("ip-permission.from-port"), Values: ports}})
}

// reconcileNLBSecurity converges an NLB that has security groups: its own frontend groups'
// rules (the source ranges on the listener ports, split across groups when they need more
// rules than one holds), the groups it carries (its own and the cluster's backend group), and
// the node groups' rule letting the backend group in (backendsg.go).
func (p *Provider) reconcileNLBSecurity(ctx context.Context, ref providers.Ref, d desiredLB, rec *lbRecord, insts []instance) error {
	want, extra, err := p.convergeOwnGroups(ctx, ref, d, rec.VPC, nlbFrontendRules(d))
	if err != nil {
		return err
	}
	groups, backend, err := p.attachedGroups(ctx, d, rec.VPC, rec.SecurityGroups, want)
	if err != nil {
		return err
	}
	if d.ManageNodeRules {
		if err := p.allowBackendOnNodes(ctx, insts, backend); err != nil {
			return err
		}
	}
	if !slices.Equal(rec.SecurityGroups, groups) {
		if _, err := p.api.nlb.SetSecurityGroups(ctx, &elbv2.SetSecurityGroupsInput{LoadBalancerArn: aws.String(rec.ARN), SecurityGroups: groups}); err != nil {
			return fmt.Errorf("setting security groups of %s: %w", d.Name, err)
		}
		rec.SecurityGroups = groups
	}
	for _, g := range extra {
		if err := p.deleteSecurityGroup(ctx, aws.ToString(g.GroupId)); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) createNLB(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*lbRecord, error) {
	olds, err := p.findOwnedLBs(ctx, ref)
	if err != nil {
		return nil, err
	}
	vpc := vpcOf(insts)
	if vpc == "" && len(olds) > 0 {
		vpc = olds[0].VPC
	}
	subnets, err := p.resolveSubnets(ctx, d, vpc)
	if err != nil {
		return nil, err
	}
	tags := maps.Clone(d.Tags)
	if v := replacedValue(olds, d.Name); v != "" {
		tags[tagReplaces] = v
	}
	if vpc == "" && len(subnets) > 0 {
		vpc = subnets[0].VPC
	}
	var groups []string
	if !p.opts.sgLessNLBs {
		// Created with security groups: its own frontend group (the source ranges) and the
		// backend group (the nodes let it in). An NLB created without any never gets one.
		own, err := p.ensureOwnSecurityGroup(ctx, d, vpc)
		if err != nil {
			return nil, err
		}
		var backend string
		groups, backend, err = p.attachedGroups(ctx, d, vpc, nil, []string{aws.ToString(own.GroupId)})
		if err != nil {
			return nil, err
		}
		if backend != "" && d.ManageNodeRules {
			if err := p.allowBackendOnNodes(ctx, insts, backend); err != nil {
				return nil, err
			}
		}
	}
	in := &elbv2.CreateLoadBalancerInput{
		SecurityGroups: groups,
		Name:           aws.String(d.Name),
		Type:           elbv2types.LoadBalancerTypeEnumNetwork,
		Scheme:         elbv2types.LoadBalancerSchemeEnum(d.Scheme),
		IpAddressType:  elbv2types.IpAddressType(d.NLB.IPAddressType),
		Tags:           toELBv2Tags(tags),
	}
	if in.SubnetMappings, err = subnetMappings(d.NLB, subnets); err != nil {
		return nil, err
	}
	if in.SubnetMappings == nil {
		in.Subnets = subnetIDs(subnets)
	}
	out, err := p.api.nlb.CreateLoadBalancer(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("creating NLB %s: %w", d.Name, err)
	}
	if len(out.LoadBalancers) == 0 {
		return nil, fmt.Errorf("creating NLB %s: AWS returned no load balancer", d.Name)
	}
	p.log.Info("Created NLB", "service", ref, "name", d.Name, "scheme", d.Scheme, "replaces", tags[tagReplaces])
	return nlbRecord(&out.LoadBalancers[0], tags), nil
}

// subnetMappings pairs the Service's Elastic IPs or private addresses with the subnets, in
// subnet order; nil when it gives none.
func subnetMappings(n nlbSpec, subnets []subnet) ([]elbv2types.SubnetMapping, error) {
	addrs, key := n.EIPAllocations, annotations.AWSEIPAllocations
	if len(n.PrivateIPv4s) > 0 {
		addrs, key = n.PrivateIPv4s, annotations.AWSPrivateIPv4Addresses
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	if len(addrs) != len(subnets) {
		return nil, providers.Invalid("metadata.annotations["+key+"]", "lists %d addresses for %d subnets (%s): give one per subnet, in that order", len(addrs), len(subnets), strings.Join(subnetIDs(subnets), ", "))
	}
	out := make([]elbv2types.SubnetMapping, len(subnets))
	for i, s := range subnets {
		out[i] = elbv2types.SubnetMapping{SubnetId: aws.String(s.ID)}
		if len(n.PrivateIPv4s) > 0 {
			out[i].PrivateIPv4Address = aws.String(addrs[i])
		} else {
			out[i].AllocationId = aws.String(addrs[i])
		}
	}
	return out, nil
}

func nlbRecord(lb *elbv2types.LoadBalancer, tags map[string]string) *lbRecord {
	rec := &lbRecord{
		IPAddressType: string(lb.IpAddressType),
		Kind:          NLB,
		Name:          aws.ToString(lb.LoadBalancerName),
		ARN:           aws.ToString(lb.LoadBalancerArn),
		DNSName:       aws.ToString(lb.DNSName),
		Scheme:        string(lb.Scheme),
		VPC:           aws.ToString(lb.VpcId),
		Tags:          tags,
	}
	rec.SecurityGroups = slices.Sorted(slices.Values(lb.SecurityGroups))
	for _, az := range lb.AvailabilityZones {
		rec.Subnets = append(rec.Subnets, aws.ToString(az.SubnetId))
	}
	slices.Sort(rec.Subnets)
	return rec
}

// findNLB describes the NLB named name; nil when there is none.
func (p *Provider) findNLB(ctx context.Context, name string) (*elbv2types.LoadBalancer, error) {
	out, err := p.api.nlb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	if isCode(err, "LoadBalancerNotFound") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing NLB %s: %w", name, err)
	}
	for i := range out.LoadBalancers {
		if out.LoadBalancers[i].Type == elbv2types.LoadBalancerTypeEnumNetwork {
			return &out.LoadBalancers[i], nil
		}
	}
	return nil, nil
}

// reconcileNLBAttributes converges the load-balancer attributes the provider manages
// (cross-zone, access logs): a key the Service does not set holds its default.
func (p *Provider) reconcileNLBAttributes(ctx context.Context, d desiredLB, rec *lbRecord) error {
	want := d.NLB.Attributes
	api := p.api.nlb
	out, err := api.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: aws.String(rec.ARN)})
	if err != nil {
		return fmt.Errorf("describing attributes of %s: %w", rec.Name, err)
	}
	have := map[string]string{}
	for _, a := range out.Attributes {
		have[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	var change []elbv2types.LoadBalancerAttribute
	for _, k := range sortedKeys(want) {
		if have[k] != want[k] {
			change = append(change, elbv2types.LoadBalancerAttribute{Key: aws.String(k), Value: aws.String(want[k])})
		}
	}
	if len(change) == 0 {
		return nil
	}
	if _, err := api.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: aws.String(rec.ARN), Attributes: change}); err != nil {
		return fmt.Errorf("setting attributes of %s: %w", rec.Name, err)
	}
	return nil
}

// deleteNLB deletes the NLB named name when owned for ref, then its target groups.
func (p *Provider) deleteNLB(ctx context.Context, ref providers.Ref, name string) error {
	cur, err := p.findNLB(ctx, name)
	if err != nil || cur == nil {
		return err
	}
	arn := aws.ToString(cur.LoadBalancerArn)
	tags, err := p.nlbTags(ctx, []string{arn})
	if err != nil {
		return err
	}
	if !ownedBy(tags[arn], p.cluster, ref.UID) {
		return nil
	}
	return p.deleteNLBByARN(ctx, ref, name, arn)
}

// deleteNLBByARN deletes an NLB known to be owned for ref, then its target groups.
func (p *Provider) deleteNLBByARN(ctx context.Context, ref providers.Ref, name, arn string) error {
	tgs, err := p.targetGroupsOf(ctx, arn)
	if err != nil {
		return err
	}
	if _, err := p.api.nlb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil && !isCode(err, "LoadBalancerNotFound") {
		return fmt.Errorf("deleting NLB %s: %w", name, err)
	}
	p.log.Info("Deleted NLB", "service", ref, "name", name)
	for _, tg := range tgs {
		if err := p.deleteTargetGroup(ctx, aws.ToString(tg.TargetGroupArn)); err != nil {
			return err
		}
	}
	return nil
}
