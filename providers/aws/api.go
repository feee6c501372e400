package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// The AWS operations the provider makes, one small consumer-side interface per resource, and
// clients, the seams through which it makes them.

// clients hold the seams: the provider calls AWS only through them. newClients fills every one
// from the SDK clients of one configuration; a unit test sets the one it exercises to a fake
// (api_test.go).
type clients struct {
	instances    instanceAPI
	subnets      subnetAPI
	groups       securityGroupAPI
	classic      classicAPI
	nlb          nlbAPI
	listeners    listenerAPI
	targetGroups targetGroupAPI
}

// newClients builds the SDK's EC2, ELB and ELBv2 clients on cfg.
func newClients(cfg aws.Config) clients {
	ec2c, elbc, elbv2c := ec2.NewFromConfig(cfg), elb.NewFromConfig(cfg), elbv2.NewFromConfig(cfg)
	return clients{
		instances: ec2c, subnets: ec2c, groups: ec2c,
		classic: elbc,
		nlb:     elbv2c, listeners: elbv2c, targetGroups: elbv2c,
	}
}

// instanceAPI is what the provider needs to know about backend instances.
type instanceAPI interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

var _ instanceAPI = (*ec2.Client)(nil)

// subnetAPI finds the subnets load balancers are placed in.
type subnetAPI interface {
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
}

var _ subnetAPI = (*ec2.Client)(nil)

// securityGroupAPI manages the node groups' rules and the Classic ELBs' own groups.
type securityGroupAPI interface {
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	CreateSecurityGroup(ctx context.Context, in *ec2.CreateSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.CreateSecurityGroupOutput, error)
	DeleteSecurityGroup(ctx context.Context, in *ec2.DeleteSecurityGroupInput, opts ...func(*ec2.Options)) (*ec2.DeleteSecurityGroupOutput, error)
	AuthorizeSecurityGroupIngress(ctx context.Context, in *ec2.AuthorizeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.AuthorizeSecurityGroupIngressOutput, error)
	RevokeSecurityGroupIngress(ctx context.Context, in *ec2.RevokeSecurityGroupIngressInput, opts ...func(*ec2.Options)) (*ec2.RevokeSecurityGroupIngressOutput, error)
	UpdateSecurityGroupRuleDescriptionsIngress(ctx context.Context, in *ec2.UpdateSecurityGroupRuleDescriptionsIngressInput, opts ...func(*ec2.Options)) (*ec2.UpdateSecurityGroupRuleDescriptionsIngressOutput, error)
}

var _ securityGroupAPI = (*ec2.Client)(nil)

// classicAPI manages Classic ELBs.
type classicAPI interface {
	DescribeLoadBalancers(ctx context.Context, in *elb.DescribeLoadBalancersInput, opts ...func(*elb.Options)) (*elb.DescribeLoadBalancersOutput, error)
	CreateLoadBalancer(ctx context.Context, in *elb.CreateLoadBalancerInput, opts ...func(*elb.Options)) (*elb.CreateLoadBalancerOutput, error)
	DeleteLoadBalancer(ctx context.Context, in *elb.DeleteLoadBalancerInput, opts ...func(*elb.Options)) (*elb.DeleteLoadBalancerOutput, error)
	DescribeTags(ctx context.Context, in *elb.DescribeTagsInput, opts ...func(*elb.Options)) (*elb.DescribeTagsOutput, error)
	AddTags(ctx context.Context, in *elb.AddTagsInput, opts ...func(*elb.Options)) (*elb.AddTagsOutput, error)
	RemoveTags(ctx context.Context, in *elb.RemoveTagsInput, opts ...func(*elb.Options)) (*elb.RemoveTagsOutput, error)
	CreateLoadBalancerListeners(ctx context.Context, in *elb.CreateLoadBalancerListenersInput, opts ...func(*elb.Options)) (*elb.CreateLoadBalancerListenersOutput, error)
	DeleteLoadBalancerListeners(ctx context.Context, in *elb.DeleteLoadBalancerListenersInput, opts ...func(*elb.Options)) (*elb.DeleteLoadBalancerListenersOutput, error)
	ConfigureHealthCheck(ctx context.Context, in *elb.ConfigureHealthCheckInput, opts ...func(*elb.Options)) (*elb.ConfigureHealthCheckOutput, error)
	DescribeLoadBalancerAttributes(ctx context.Context, in *elb.DescribeLoadBalancerAttributesInput, opts ...func(*elb.Options)) (*elb.DescribeLoadBalancerAttributesOutput, error)
	ModifyLoadBalancerAttributes(ctx context.Context, in *elb.ModifyLoadBalancerAttributesInput, opts ...func(*elb.Options)) (*elb.ModifyLoadBalancerAttributesOutput, error)
	RegisterInstancesWithLoadBalancer(ctx context.Context, in *elb.RegisterInstancesWithLoadBalancerInput, opts ...func(*elb.Options)) (*elb.RegisterInstancesWithLoadBalancerOutput, error)
	DeregisterInstancesFromLoadBalancer(ctx context.Context, in *elb.DeregisterInstancesFromLoadBalancerInput, opts ...func(*elb.Options)) (*elb.DeregisterInstancesFromLoadBalancerOutput, error)
	CreateLoadBalancerPolicy(ctx context.Context, in *elb.CreateLoadBalancerPolicyInput, opts ...func(*elb.Options)) (*elb.CreateLoadBalancerPolicyOutput, error)
	SetLoadBalancerPoliciesOfListener(ctx context.Context, in *elb.SetLoadBalancerPoliciesOfListenerInput, opts ...func(*elb.Options)) (*elb.SetLoadBalancerPoliciesOfListenerOutput, error)
	SetLoadBalancerPoliciesForBackendServer(ctx context.Context, in *elb.SetLoadBalancerPoliciesForBackendServerInput, opts ...func(*elb.Options)) (*elb.SetLoadBalancerPoliciesForBackendServerOutput, error)
	ApplySecurityGroupsToLoadBalancer(ctx context.Context, in *elb.ApplySecurityGroupsToLoadBalancerInput, opts ...func(*elb.Options)) (*elb.ApplySecurityGroupsToLoadBalancerOutput, error)
	AttachLoadBalancerToSubnets(ctx context.Context, in *elb.AttachLoadBalancerToSubnetsInput, opts ...func(*elb.Options)) (*elb.AttachLoadBalancerToSubnetsOutput, error)
	DetachLoadBalancerFromSubnets(ctx context.Context, in *elb.DetachLoadBalancerFromSubnetsInput, opts ...func(*elb.Options)) (*elb.DetachLoadBalancerFromSubnetsOutput, error)
}

var _ classicAPI = (*elb.Client)(nil)

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
	SetIpAddressType(ctx context.Context, in *elbv2.SetIpAddressTypeInput, opts ...func(*elbv2.Options)) (*elbv2.SetIpAddressTypeOutput, error)
	SetSecurityGroups(ctx context.Context, in *elbv2.SetSecurityGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.SetSecurityGroupsOutput, error)
}

var _ nlbAPI = (*elbv2.Client)(nil)

// listenerAPI manages NLB listeners.
type listenerAPI interface {
	DescribeListeners(ctx context.Context, in *elbv2.DescribeListenersInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeListenersOutput, error)
	CreateListener(ctx context.Context, in *elbv2.CreateListenerInput, opts ...func(*elbv2.Options)) (*elbv2.CreateListenerOutput, error)
	ModifyListener(ctx context.Context, in *elbv2.ModifyListenerInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyListenerOutput, error)
	DeleteListener(ctx context.Context, in *elbv2.DeleteListenerInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteListenerOutput, error)
}

var _ listenerAPI = (*elbv2.Client)(nil)

// targetGroupAPI manages NLB target groups and their instance targets.
type targetGroupAPI interface {
	DescribeTargetGroups(ctx context.Context, in *elbv2.DescribeTargetGroupsInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error)
	CreateTargetGroup(ctx context.Context, in *elbv2.CreateTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.CreateTargetGroupOutput, error)
	ModifyTargetGroup(ctx context.Context, in *elbv2.ModifyTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupOutput, error)
	DeleteTargetGroup(ctx context.Context, in *elbv2.DeleteTargetGroupInput, opts ...func(*elbv2.Options)) (*elbv2.DeleteTargetGroupOutput, error)
	DescribeTargetHealth(ctx context.Context, in *elbv2.DescribeTargetHealthInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
	RegisterTargets(ctx context.Context, in *elbv2.RegisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.RegisterTargetsOutput, error)
	DeregisterTargets(ctx context.Context, in *elbv2.DeregisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.DeregisterTargetsOutput, error)
	DescribeTargetGroupAttributes(ctx context.Context, in *elbv2.DescribeTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupAttributesOutput, error)
	ModifyTargetGroupAttributes(ctx context.Context, in *elbv2.ModifyTargetGroupAttributesInput, opts ...func(*elbv2.Options)) (*elbv2.ModifyTargetGroupAttributesOutput, error)
}

var _ targetGroupAPI = (*elbv2.Client)(nil)

// ec2Filter is an EC2 describe filter.
type ec2Filter = ec2types.Filter
