package aws

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

const (
	tagRoleELB         = "kubernetes.io/role/elb"
	tagRoleInternalELB = "kubernetes.io/role/internal-elb"
)

type subnet struct {
	ID   string
	AZ   string
	VPC  string
	CIDR netip.Prefix
	Tags map[string]string
}

// resolveSubnets returns the subnets for d: those named by the Service or the configuration
// (IDs or Name tags), or else discovered in vpc.
func (p *Provider) resolveSubnets(ctx context.Context, d desiredLB, vpc string) ([]subnet, error) {
	if len(d.Subnets) > 0 {
		return p.namedSubnets(ctx, d.Subnets)
	}
	if vpc == "" {
		return nil, fmt.Errorf("no backend instance to find the VPC from, and no subnets named: set %s or the provider's subnets", annotations.AWSSubnets)
	}
	all, err := p.describeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2Filter{{Name: aws.String("vpc-id"), Values: []string{vpc}}}})
	if err != nil {
		return nil, err
	}
	chosen := pickSubnets(all, p.cluster, d.Scheme)
	if len(chosen) == 0 {
		role := tagRoleELB
		if d.Scheme == schemeInternal {
			role = tagRoleInternalELB
		}
		return nil, fmt.Errorf("no subnet in %s is usable for a %s load balancer: tag subnets with %s=1 (and %s=owned or shared), or set %s",
			vpc, d.Scheme, role, clusterTag(p.cluster), annotations.AWSSubnets)
	}
	return chosen, nil
}

// pickSubnets chooses one subnet per availability zone, as cloud-provider-aws does: subnets of
// this cluster or of no cluster; preferring the role tag of the scheme, then the cluster tag,
// then the lowest ID. An internet-facing load balancer skips subnets marked internal-only.
func pickSubnets(all []subnet, cluster, scheme string) []subnet {
	role, otherRole := tagRoleELB, tagRoleInternalELB
	if scheme == schemeInternal {
		role, otherRole = tagRoleInternalELB, tagRoleELB
	}
	best := map[string]subnet{}
	score := func(s subnet) int {
		n := 0
		if _, ok := s.Tags[role]; ok {
			n += 2
		}
		if _, ok := s.Tags[clusterTag(cluster)]; ok {
			n++
		}
		return n
	}
	for _, s := range all {
		if !forCluster(s.Tags, cluster) {
			continue
		}
		_, hasRole := s.Tags[role]
		_, hasOther := s.Tags[otherRole]
		if scheme == schemeInternetFacing && hasOther && !hasRole {
			continue
		}
		cur, ok := best[s.AZ]
		if !ok || score(s) > score(cur) || (score(s) == score(cur) && s.ID < cur.ID) {
			best[s.AZ] = s
		}
	}
	out := make([]subnet, 0, len(best))
	for _, s := range best {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b subnet) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// forCluster: the subnet carries this cluster's tag, or no cluster tag at all.
func forCluster(tags map[string]string, cluster string) bool {
	if _, ok := tags[clusterTag(cluster)]; ok {
		return true
	}
	for k := range tags {
		if strings.HasPrefix(k, tagClusterPrefix) {
			return false
		}
	}
	return true
}

// namedSubnets resolves subnet IDs and Name tags; every name must resolve.
func (p *Provider) namedSubnets(ctx context.Context, names []string) ([]subnet, error) {
	var ids, tagNames []string
	for _, n := range names {
		if strings.HasPrefix(n, "subnet-") {
			ids = append(ids, n)
		} else {
			tagNames = append(tagNames, n)
		}
	}
	var out []subnet
	if len(ids) > 0 {
		got, err := p.describeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2Filter{{Name: aws.String("subnet-id"), Values: ids}}})
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(tagNames) > 0 {
		got, err := p.describeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2Filter{{Name: aws.String("tag:Name"), Values: tagNames}}})
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(s subnet) bool { return s.ID == n || s.Tags["Name"] == n }) {
			return nil, providers.Invalid("metadata.annotations["+annotations.AWSSubnets+"]", "subnet %q does not exist", n)
		}
	}
	slices.SortFunc(out, func(a, b subnet) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b subnet) bool { return a.ID == b.ID }), nil
}

// subnetsByID describes subnets by ID (the health-check sources of an existing NLB).
func (p *Provider) subnetsByID(ctx context.Context, ids []string) ([]subnet, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return p.describeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2Filter{{Name: aws.String("subnet-id"), Values: ids}}})
}

func (p *Provider) describeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput) ([]subnet, error) {
	var out []subnet
	pager := ec2.NewDescribeSubnetsPaginator(p.api.subnets, in)
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing subnets: %w", err)
		}
		for _, s := range page.Subnets {
			sn := subnet{ID: aws.ToString(s.SubnetId), AZ: aws.ToString(s.AvailabilityZone), VPC: aws.ToString(s.VpcId), Tags: ec2Tags(s.Tags)}
			sn.CIDR, _ = netip.ParsePrefix(aws.ToString(s.CidrBlock))
			out = append(out, sn)
		}
	}
	return out, nil
}

func subnetIDs(s []subnet) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.ID
	}
	return out
}

func subnetCIDRs(s []subnet) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		if x.CIDR.IsValid() {
			out = append(out, x.CIDR)
		}
	}
	return out
}
