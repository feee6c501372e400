package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/providers"
)

// Ownership. Everything the provider creates carries:
//
//	kubernetes.io/cluster/<cluster> = owned   (as cloud-provider-aws; the cluster owns it)
//	kubernetes.io/service-name      = <namespace>/<name>
//	portico-lb.io/service-uid       = <uid>   (the Service; two Services reusing a name differ)
//
// plus the configured extra tags and the Service's additional-resource-tags. A load balancer
// created to replace another one (a scheme or kind change) also carries
//
//	portico-lb.io/replaces = <classic|nlb>/<name>
//
// until the replaced one is gone, and every load balancer, once converged,
//
//	portico-lb.io/applied = <hash of the desired model last converged>   (applied.go)
//
// Node security-group rules cannot carry tags everywhere, so
// they are owned through their description: "portico/<uid>/<lb-name>/<purpose>" (ruleDescription).
// The cluster's shared backend security group (backendsg.go) belongs to no Service: it carries
// the cluster tag and portico-lb.io/resource=backend-sg, and its node rule is described
// "portico/backend/<cluster hash>/traffic".
// Nothing without these marks is ever modified or deleted, except the node security groups'
// rules the provider added.
// The IAM policy (deploy/aws/iam-policy.json) relies on the cluster tag: a create is allowed
// only with kubernetes.io/cluster/<cluster> in its request, a change only to a resource carrying
// it (the nodes' security groups included), a delete only where it says owned.
const (
	tagClusterPrefix = "kubernetes.io/cluster/"
	tagOwned         = "owned"
	tagServiceName   = "kubernetes.io/service-name"
	tagServiceUID    = "portico-lb.io/service-uid"
	tagReplaces      = "portico-lb.io/replaces"
	tagApplied       = "portico-lb.io/applied"
	rulePrefix       = "portico/"
)

func clusterTag(cluster string) string { return tagClusterPrefix + cluster }

// ownerTags are the tags that make a resource the provider's for ref.
func ownerTags(cluster string, ref providers.Ref) map[string]string {
	return map[string]string{
		clusterTag(cluster): tagOwned,
		tagServiceName:      ref.Namespace + "/" + ref.Name,
		tagServiceUID:       ref.UID,
	}
}

// resourceTags are every tag of a resource created for ref: extra tags first, so that the
// ownership tags always win.
func resourceTags(cluster string, ref providers.Ref, extra map[string]string, spec ServiceOptions) map[string]string {
	out := map[string]string{}
	maps.Copy(out, extra)
	maps.Copy(out, spec.AdditionalTags)
	maps.Copy(out, ownerTags(cluster, ref))
	return out
}

// ownedBy reports whether tags mark a resource as created by this cluster for the Service uid.
func ownedBy(tags map[string]string, cluster, uid string) bool {
	return tags[clusterTag(cluster)] == tagOwned && tags[tagServiceUID] == uid
}

// ruleDescription marks a security-group rule as the provider's, for the Service uid and the
// load balancer lbName (two load balancers of one Service coexist during a replacement).
func ruleDescription(uid, lbName, purpose string) string {
	return rulePrefix + uid + "/" + lbName + "/" + purpose
}

// ruleLB returns the load balancer name of a rule description the provider wrote, or "".
func ruleLB(desc string) string {
	parts := strings.Split(desc, "/")
	if len(parts) != 4 || parts[0]+"/" != rulePrefix {
		return ""
	}
	return parts[2]
}

// ruleOwner returns the Service uid of a rule description the provider wrote, or "".
func ruleOwner(desc string) string {
	rest, ok := strings.CutPrefix(desc, rulePrefix)
	if !ok {
		return ""
	}
	uid, _, _ := strings.Cut(rest, "/")
	return uid
}

// Names. AWS load balancer and target group names are unique per account and region, at most 32
// characters of [a-zA-Z0-9-]. The name holds a hash of everything AWS cannot change in place, so
// that a replacement never collides with the resource it replaces, and a recreated resource after
// a crash gets the same name (found, not duplicated).

func toELBv2Tags(m map[string]string) []elbv2types.Tag {
	var out []elbv2types.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, elbv2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func toELBTags(m map[string]string) []elbtypes.Tag {
	var out []elbtypes.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, elbtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func toEC2Tags(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range sortedKeys(m) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
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

// nlbTags reads the tags of ELBv2 resources (load balancers or target groups), 20 per call.
func (p *Provider) nlbTags(ctx context.Context, arns []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for chunk := range slices.Chunk(arns, describeTagsBatch) {
		res, err := p.api.nlb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: chunk})
		if isCode(err, "LoadBalancerNotFound", "TargetGroupNotFound") {
			// One went away meanwhile: read the rest one by one.
			for _, arn := range chunk {
				one, err := p.api.nlb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
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
	if _, err := p.api.nlb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{rec.ARN}, Tags: toELBv2Tags(missing)}); err != nil {
		return fmt.Errorf("tagging NLB %s: %w", rec.Name, err)
	}
	maps.Copy(rec.Tags, missing)
	return nil
}

// untagLB removes one tag from a load balancer of either kind.
func (p *Provider) untagLB(ctx context.Context, rec *lbRecord, key string) error {
	var err error
	if rec.Kind == NLB {
		_, err = p.api.nlb.RemoveTags(ctx, &elbv2.RemoveTagsInput{ResourceArns: []string{rec.ARN}, TagKeys: []string{key}})
	} else {
		err = p.untagClassic(ctx, rec.Name, key)
	}
	if err != nil {
		return fmt.Errorf("removing tag %s from %s: %w", key, rec.Name, err)
	}
	return nil
}

func (p *Provider) classicTags(ctx context.Context, names []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for chunk := range slices.Chunk(names, classicTagsBatch) {
		res, err := p.api.classic.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: chunk})
		if isCode(err, "LoadBalancerNotFound", "AccessPointNotFound") && len(chunk) > 1 {
			for _, n := range chunk {
				one, err := p.classicTags(ctx, []string{n})
				if err != nil {
					return nil, err
				}
				maps.Copy(out, one)
			}
			continue
		}
		if isCode(err, "LoadBalancerNotFound", "AccessPointNotFound") {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("describing Classic ELB tags: %w", err)
		}
		for _, td := range res.TagDescriptions {
			m := map[string]string{}
			for _, t := range td.Tags {
				m[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
			out[aws.ToString(td.LoadBalancerName)] = m
		}
	}
	return out, nil
}

func (p *Provider) untagClassic(ctx context.Context, name, key string) error {
	_, err := p.api.classic.RemoveTags(ctx, &elb.RemoveTagsInput{LoadBalancerNames: []string{name}, Tags: []elbtypes.TagKeyOnly{{Key: aws.String(key)}}})
	return err
}

// tagApplied writes the applied tag when it changed.
func (p *Provider) tagApplied(ctx context.Context, rec *lbRecord, hash string) error {
	if rec.Tags[tagApplied] != hash {
		var err error
		tag := map[string]string{tagApplied: hash}
		if rec.Kind == NLB {
			_, err = p.api.nlb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{rec.ARN}, Tags: toELBv2Tags(tag)})
		} else {
			_, err = p.api.classic.AddTags(ctx, &elb.AddTagsInput{LoadBalancerNames: []string{rec.Name}, Tags: toELBTags(tag)})
		}
		if err != nil {
			return fmt.Errorf("tagging %s with the applied state: %w", rec.Name, err)
		}
	}
	return nil
}

// AWS tag limits (in Unicode characters).
const (
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// checkTag checks a configured tag (--aws-extra-tags) against the limits, in bytes.
func checkTag(k, v string) string {
	switch {
	case k == "" || len(k) > maxTagKeyLen:
		return "tag keys must be 1-128 characters"
	case strings.HasPrefix(strings.ToLower(k), "aws:"):
		return `tag keys must not start with "aws:"`
	case len(v) > maxTagValueLen:
		return "tag values must be at most 256 characters"
	}
	return ""
}
