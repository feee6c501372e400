package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// nlbAPI manages Network Load Balancers and their tags.
type nlbAPI interface {
	DescribeLoadBalancers(ctx context.Context, in *elbv2.DescribeLoadBalancersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancersOutput, error)
	CreateLoadBalancer(ctx context.Context, in *elbv2.CreateLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateLoadBalancerOutput, error)
	DeleteLoadBalancer(ctx context.Context, in *elbv2.DeleteLoadBalancerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteLoadBalancerOutput, error)
	DescribeTags(ctx context.Context, in *elbv2.DescribeTagsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTagsOutput, error)
	AddTags(ctx context.Context, in *elbv2.AddTagsInput, opts ...func(*elbv2.Options)) (*elbv2.AddTagsOutput, error)
	RemoveTags(ctx context.Context, in *elbv2.RemoveTagsInput, opts ...func(*elbv2.Options)) (*elbv2.RemoveTagsOutput, error)
	DescribeLoadBalancerAttributes(ctx context.Context, in *elbv2.DescribeLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancerAttributesOutput, error)
	ModifyLoadBalancerAttributes(ctx context.Context, in *elbv2.ModifyLoadBalancerAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyLoadBalancerAttributesOutput, error)
	SetSubnets(ctx context.Context, in *elbv2.SetSubnetsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSubnetsOutput, error)
}

var _ nlbAPI = (*elbv2.Client)(nil)

// describeTagsBatch is the most resources one ELBv2 DescribeTags call takes.
const describeTagsBatch = 20

// ensureNLB finds the NLB by its name, or creates it after looking for load balancers of the
// Service it replaces, and converges listeners, target groups, targets, attributes and node
// security-group rules.
func (p *Provider) ensureNLB(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*lbRecord, error) {
	api := nlbAPI(p.elbv2)
	cur, err := p.findNLB(ctx, d.Name)
	if err != nil {
		return nil, err
	}
	var rec *lbRecord
	if cur == nil {
		rec, err = p.createNLB(ctx, ref, d, insts)
		if err != nil {
			return nil, err
		}
	} else {
		tags, err := p.nlbTags(ctx, []string{aws.ToString(cur.LoadBalancerArn)})
		if err != nil {
			return nil, err
		}
		rec = nlbRecord(cur, tags[aws.ToString(cur.LoadBalancerArn)])
		if !ownedBy(rec.Tags, p.cluster, ref.UID) {
			return nil, fmt.Errorf("load balancer %s exists but is not tagged as owned by Service %s (uid %s) of cluster %s; not touching it", d.Name, ref, ref.UID, p.cluster)
		}
		if err := p.tagNLB(ctx, rec, d.Tags); err != nil {
			return nil, err
		}
		if len(d.Subnets) > 0 {
			want, err := p.namedSubnets(ctx, d.Subnets)
			if err != nil {
				return nil, err
			}
			if !slices.Equal(subnetIDs(want), rec.Subnets) {
				if _, err := api.SetSubnets(ctx, &elbv2.SetSubnetsInput{LoadBalancerArn: aws.String(rec.ARN), Subnets: subnetIDs(want)}); err != nil {
					return nil, fmt.Errorf("setting subnets of %s: %w", d.Name, err)
				}
				rec.Subnets = subnetIDs(want)
			}
		}
	}
	vpc := rec.VPC
	if err := p.reconcileListeners(ctx, d, rec, vpc, instanceIDsOf(insts)); err != nil {
		return nil, err
	}
	if err := p.reconcileNLBAttributes(ctx, d, rec); err != nil {
		return nil, err
	}
	subnets, err := p.subnetsByID(ctx, rec.Subnets)
	if err != nil {
		return nil, err
	}
	groups, err := p.nodeSecurityGroups(ctx, insts)
	if err != nil {
		return nil, err
	}
	rules := nlbNodeRules(d, subnetCIDRs(subnets))
	for _, g := range groups {
		if err := p.reconcileRules(ctx, g, ref.UID, d.Name, rules); err != nil {
			return nil, err
		}
	}
	return rec, nil
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
	out, err := nlbAPI(p.elbv2).CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name:          aws.String(d.Name),
		Type:          elbv2types.LoadBalancerTypeEnumNetwork,
		Scheme:        elbv2types.LoadBalancerSchemeEnum(d.Scheme),
		IpAddressType: elbv2types.IpAddressTypeIpv4,
		Subnets:       subnetIDs(subnets),
		Tags:          toELBv2Tags(tags),
	})
	if err != nil {
		return nil, fmt.Errorf("creating NLB %s: %w", d.Name, err)
	}
	if len(out.LoadBalancers) == 0 {
		return nil, fmt.Errorf("creating NLB %s: AWS returned no load balancer", d.Name)
	}
	p.log.Info("Created NLB", "service", ref, "name", d.Name, "scheme", d.Scheme, "replaces", tags[tagReplaces])
	return nlbRecord(&out.LoadBalancers[0], tags), nil
}

func nlbRecord(lb *elbv2types.LoadBalancer, tags map[string]string) *lbRecord {
	rec := &lbRecord{
		Kind:    annotations.AWSNLB,
		Name:    aws.ToString(lb.LoadBalancerName),
		ARN:     aws.ToString(lb.LoadBalancerArn),
		DNSName: aws.ToString(lb.DNSName),
		Scheme:  string(lb.Scheme),
		VPC:     aws.ToString(lb.VpcId),
		Tags:    tags,
	}
	for _, az := range lb.AvailabilityZones {
		rec.Subnets = append(rec.Subnets, aws.ToString(az.SubnetId))
	}
	slices.Sort(rec.Subnets)
	return rec
}

// findNLB describes the NLB named name; nil when there is none.
func (p *Provider) findNLB(ctx context.Context, name string) (*elbv2types.LoadBalancer, error) {
	out, err := nlbAPI(p.elbv2).DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
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

// findOwnedNLBs pages through the region's load balancers and reads their tags in batches.
func (p *Provider) findOwnedNLBs(ctx context.Context, ref providers.Ref) ([]lbRecord, error) {
	var all []elbv2types.LoadBalancer
	pager := elbv2.NewDescribeLoadBalancersPaginator(nlbAPI(p.elbv2), &elbv2.DescribeLoadBalancersInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing NLBs: %w", err)
		}
		for _, lb := range page.LoadBalancers {
			if lb.Type == elbv2types.LoadBalancerTypeEnumNetwork {
				all = append(all, lb)
			}
		}
	}
	arns := make([]string, len(all))
	for i, lb := range all {
		arns[i] = aws.ToString(lb.LoadBalancerArn)
	}
	tags, err := p.nlbTags(ctx, arns)
	if err != nil {
		return nil, err
	}
	var out []lbRecord
	for i := range all {
		t := tags[arns[i]]
		if ownedBy(t, p.cluster, ref.UID) {
			out = append(out, *nlbRecord(&all[i], t))
		}
	}
	return out, nil
}

// nlbTags reads the tags of ELBv2 resources (load balancers or target groups), 20 per call.
func (p *Provider) nlbTags(ctx context.Context, arns []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for chunk := range slices.Chunk(arns, describeTagsBatch) {
		res, err := nlbAPI(p.elbv2).DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: chunk})
		if isCode(err, "LoadBalancerNotFound", "TargetGroupNotFound") {
			// One went away meanwhile: read the rest one by one.
			for _, arn := range chunk {
				one, err := nlbAPI(p.elbv2).DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
				if isCode(err, "LoadBalancerNotFound", "TargetGroupNotFound") {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("describing tags: %w", err)
				}
				addTagDescriptions(out, one.TagDescriptions)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describing tags: %w", err)
		}
		addTagDescriptions(out, res.TagDescriptions)
	}
	return out, nil
}

func addTagDescriptions(out map[string]map[string]string, tds []elbv2types.TagDescription) {
	for _, td := range tds {
		m := map[string]string{}
		for _, t := range td.Tags {
			m[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		out[aws.ToString(td.ResourceArn)] = m
	}
}

// tagNLB adds the desired tags the NLB lacks (additional tags added to the Service later).
func (p *Provider) tagNLB(ctx context.Context, rec *lbRecord, want map[string]string) error {
	missing := missingTags(rec.Tags, want)
	if len(missing) == 0 {
		return nil
	}
	if _, err := nlbAPI(p.elbv2).AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{rec.ARN}, Tags: toELBv2Tags(missing)}); err != nil {
		return fmt.Errorf("tagging NLB %s: %w", rec.Name, err)
	}
	maps.Copy(rec.Tags, missing)
	return nil
}

func missingTags(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			out[k] = v
		}
	}
	return out
}

// reconcileNLBAttributes sets cross-zone load balancing when the Service asks for a value.
func (p *Provider) reconcileNLBAttributes(ctx context.Context, d desiredLB, rec *lbRecord) error {
	if d.NLB.CrossZone == nil {
		return nil
	}
	want := fmt.Sprint(*d.NLB.CrossZone)
	api := nlbAPI(p.elbv2)
	out, err := api.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: aws.String(rec.ARN)})
	if err != nil {
		return fmt.Errorf("describing attributes of %s: %w", rec.Name, err)
	}
	for _, a := range out.Attributes {
		if aws.ToString(a.Key) == "load_balancing.cross_zone.enabled" && aws.ToString(a.Value) == want {
			return nil
		}
	}
	_, err = api.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{
		LoadBalancerArn: aws.String(rec.ARN),
		Attributes:      []elbv2types.LoadBalancerAttribute{{Key: aws.String("load_balancing.cross_zone.enabled"), Value: aws.String(want)}},
	})
	if err != nil {
		return fmt.Errorf("setting cross-zone load balancing of %s: %w", rec.Name, err)
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
	tgs, err := p.targetGroupsOf(ctx, arn)
	if err != nil {
		return err
	}
	if _, err := nlbAPI(p.elbv2).DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil && !isCode(err, "LoadBalancerNotFound") {
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

// untagLB removes one tag from a load balancer of either kind.
func (p *Provider) untagLB(ctx context.Context, rec *lbRecord, key string) error {
	var err error
	if rec.Kind == annotations.AWSNLB {
		_, err = nlbAPI(p.elbv2).RemoveTags(ctx, &elbv2.RemoveTagsInput{ResourceArns: []string{rec.ARN}, TagKeys: []string{key}})
	} else {
		err = p.untagClassic(ctx, rec.Name, key)
	}
	if err != nil {
		return fmt.Errorf("removing tag %s from %s: %w", key, rec.Name, err)
	}
	return nil
}

func toELBv2Tags(m map[string]string) []elbv2types.Tag {
	var out []elbv2types.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, elbv2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}
