package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// instance is a backend node's instance as the provider needs it.
type instance struct {
	ID     string
	VPC    string
	Groups []string // security group IDs
}

// describeInstances reads the instances behind the nodes, in one paginated call. Instances AWS
// does not know (terminated, or a wrong providerID) are left out: registering them would fail.
func (p *Provider) describeInstances(ctx context.Context, ids []string) ([]instance, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []instance
	pager := ec2.NewDescribeInstancesPaginator(p.api.instances, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if isCode(err, "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed") {
			// One bad ID fails the whole call; fall back to a filter, which ignores unknown IDs.
			return p.describeInstancesByFilter(ctx, ids)
		}
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		out = appendInstances(out, page)
	}
	return out, nil
}

func (p *Provider) describeInstancesByFilter(ctx context.Context, ids []string) ([]instance, error) {
	var out []instance
	pager := ec2.NewDescribeInstancesPaginator(p.api.instances, &ec2.DescribeInstancesInput{
		Filters: []ec2Filter{{Name: aws.String("instance-id"), Values: ids}},
	})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		out = appendInstances(out, page)
	}
	return out, nil
}

func appendInstances(out []instance, page *ec2.DescribeInstancesOutput) []instance {
	for _, r := range page.Reservations {
		for _, in := range r.Instances {
			if in.State != nil && (in.State.Name == "terminated" || in.State.Name == "shutting-down") {
				continue
			}
			inst := instance{ID: aws.ToString(in.InstanceId), VPC: aws.ToString(in.VpcId)}
			for _, g := range in.SecurityGroups {
				inst.Groups = append(inst.Groups, aws.ToString(g.GroupId))
			}
			out = append(out, inst)
		}
	}
	slices.SortFunc(out, func(a, b instance) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

func instanceIDsOf(insts []instance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.ID
	}
	return out
}

func vpcOf(insts []instance) string {
	for _, in := range insts {
		if in.VPC != "" {
			return in.VPC
		}
	}
	return ""
}
