package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/providers"
)

// targetBatch is the most targets one Register/Deregister call carries.
const targetBatch = 100

// targetGroupsOf lists the target groups attached to an NLB, once each (moto may list one twice).
func (p *Provider) targetGroupsOf(ctx context.Context, lbARN string) ([]elbv2types.TargetGroup, error) {
	var out []elbv2types.TargetGroup
	seen := map[string]bool{}
	pager := elbv2.NewDescribeTargetGroupsPaginator(p.api.targetGroups, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: aws.String(lbARN)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if isCode(err, "LoadBalancerNotFound", "TargetGroupNotFound") {
			// moto answers TargetGroupNotFound for a load balancer without target groups.
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("describing target groups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			if arn := aws.ToString(tg.TargetGroupArn); !seen[arn] {
				seen[arn] = true
				out = append(out, tg)
			}
		}
	}
	return out, nil
}

// ensureTargetGroup returns the ARN of the target group want: attached already (its health
// check converged), existing unattached after a crash (adopted by name), or created.
func (p *Provider) ensureTargetGroup(ctx context.Context, d desiredLB, want targetGroupSpec, vpc string, attached map[string]elbv2types.TargetGroup) (string, error) {
	api := p.api.targetGroups
	tg, ok := attached[want.Name]
	if !ok {
		out, err := api.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{want.Name}})
		switch {
		case isCode(err, "TargetGroupNotFound"):
		case err != nil:
			return "", fmt.Errorf("describing target group %s: %w", want.Name, err)
		case len(out.TargetGroups) > 0:
			tg, ok = out.TargetGroups[0], true
		}
	}
	if !ok {
		hc := want.HC
		in := &elbv2.CreateTargetGroupInput{
			Name:                       aws.String(want.Name),
			Protocol:                   elbv2types.ProtocolEnum(want.Protocol),
			Port:                       aws.Int32(want.Port),
			VpcId:                      aws.String(vpc),
			TargetType:                 elbv2types.TargetTypeEnumInstance,
			HealthCheckProtocol:        elbv2types.ProtocolEnum(hc.Protocol),
			HealthCheckPort:            aws.String(hc.Port),
			HealthCheckIntervalSeconds: aws.Int32(hc.Interval),
			HealthCheckTimeoutSeconds:  aws.Int32(hc.Timeout),
			HealthyThresholdCount:      aws.Int32(hc.Healthy),
			UnhealthyThresholdCount:    aws.Int32(hc.Unhealthy),
			Tags:                       toELBv2Tags(d.Tags),
		}
		if hc.Path != "" {
			in.HealthCheckPath = aws.String(hc.Path)
		}
		out, err := api.CreateTargetGroup(ctx, in)
		if err != nil {
			return "", fmt.Errorf("creating target group %s: %w", want.Name, err)
		}
		return aws.ToString(out.TargetGroups[0].TargetGroupArn), nil
	}
	arn := aws.ToString(tg.TargetGroupArn)
	if healthCheckDiffers(tg, want.HC) {
		in := &elbv2.ModifyTargetGroupInput{
			TargetGroupArn:             aws.String(arn),
			HealthCheckProtocol:        elbv2types.ProtocolEnum(want.HC.Protocol),
			HealthCheckPort:            aws.String(want.HC.Port),
			HealthCheckIntervalSeconds: aws.Int32(want.HC.Interval),
			HealthCheckTimeoutSeconds:  aws.Int32(want.HC.Timeout),
			HealthyThresholdCount:      aws.Int32(want.HC.Healthy),
			UnhealthyThresholdCount:    aws.Int32(want.HC.Unhealthy),
		}
		if want.HC.Path != "" {
			in.HealthCheckPath = aws.String(want.HC.Path)
		}
		if _, err := api.ModifyTargetGroup(ctx, in); err != nil {
			return "", fmt.Errorf("modifying health check of target group %s: %w", want.Name, err)
		}
	}
	return arn, nil
}

func healthCheckDiffers(tg elbv2types.TargetGroup, hc healthCheck) bool {
	return string(tg.HealthCheckProtocol) != hc.Protocol ||
		aws.ToString(tg.HealthCheckPort) != hc.Port ||
		(hc.Path != "" && aws.ToString(tg.HealthCheckPath) != hc.Path) ||
		aws.ToInt32(tg.HealthCheckIntervalSeconds) != hc.Interval ||
		aws.ToInt32(tg.HealthCheckTimeoutSeconds) != hc.Timeout ||
		aws.ToInt32(tg.HealthyThresholdCount) != hc.Healthy ||
		aws.ToInt32(tg.UnhealthyThresholdCount) != hc.Unhealthy
}

// reconcileTargets registers the missing instances and deregisters the extra ones, in calls of
// at most targetBatch targets; nothing when the set is right. Targets use the group's port.
func (p *Provider) reconcileTargets(ctx context.Context, tgARN, name string, want []string) error {
	api := p.api.targetGroups
	out, err := api.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(tgARN)})
	if err != nil {
		return fmt.Errorf("describing targets of %s: %w", name, err)
	}
	var have []string
	for _, th := range out.TargetHealthDescriptions {
		if th.Target != nil {
			have = append(have, aws.ToString(th.Target.Id))
		}
	}
	add, remove := diffSets(have, want)
	for chunk := range slices.Chunk(add, targetBatch) {
		if _, err := api.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(tgARN), Targets: targets(chunk)}); err != nil {
			return fmt.Errorf("registering targets in %s: %w", name, err)
		}
	}
	for chunk := range slices.Chunk(remove, targetBatch) {
		if _, err := api.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(tgARN), Targets: targets(chunk)}); err != nil {
			return fmt.Errorf("deregistering targets from %s: %w", name, err)
		}
	}
	return nil
}

// reconcileTargetGroupAttributes sets the attributes the Service names (target-group-attributes)
// where they differ; the others keep their value. Nothing is read when none is named.
func (p *Provider) reconcileTargetGroupAttributes(ctx context.Context, tgARN, name string, want map[string]string) error {
	if len(want) == 0 {
		return nil
	}
	api := p.api.targetGroups
	out, err := api.DescribeTargetGroupAttributes(ctx, &elbv2.DescribeTargetGroupAttributesInput{TargetGroupArn: aws.String(tgARN)})
	if err != nil {
		return fmt.Errorf("describing attributes of target group %s: %w", name, err)
	}
	have := map[string]string{}
	for _, a := range out.Attributes {
		have[aws.ToString(a.Key)] = aws.ToString(a.Value)
	}
	var change []elbv2types.TargetGroupAttribute
	for _, k := range sortedKeys(want) {
		if have[k] != want[k] {
			change = append(change, elbv2types.TargetGroupAttribute{Key: aws.String(k), Value: aws.String(want[k])})
		}
	}
	if len(change) == 0 {
		return nil
	}
	if _, err := api.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: aws.String(tgARN), Attributes: change}); err != nil {
		return fmt.Errorf("setting attributes of target group %s: %w", name, err)
	}
	return nil
}

func targets(ids []string) []elbv2types.TargetDescription {
	out := make([]elbv2types.TargetDescription, len(ids))
	for i, id := range ids {
		out[i] = elbv2types.TargetDescription{Id: aws.String(id)}
	}
	return out
}

func (p *Provider) deleteTargetGroup(ctx context.Context, arn string) error {
	_, err := p.api.targetGroups.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: aws.String(arn)})
	switch {
	case isCode(err, "TargetGroupNotFound"):
	case isCode(err, "ResourceInUse"):
		return providers.RetryAfter(retryDetach, "target group %s is still in use", arn)
	case err != nil:
		return fmt.Errorf("deleting target group %s: %w", arn, err)
	}
	return nil
}

// deleteOwnedTargetGroups deletes the target groups tagged as owned for ref, attached or not
// (a crash between creating a group and its listener leaves one unattached).
func (p *Provider) deleteOwnedTargetGroups(ctx context.Context, ref providers.Ref) error {
	var all []elbv2types.TargetGroup
	pager := elbv2.NewDescribeTargetGroupsPaginator(p.api.targetGroups, &elbv2.DescribeTargetGroupsInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing target groups: %w", err)
		}
		all = append(all, page.TargetGroups...)
	}
	// A target group attached only to other Services' load balancers is theirs: only the tags
	// of the others are read, those attached to nothing or to a load balancer named as one of
	// ref's (lbName; moto keeps a deleted load balancer's ARN on its target groups).
	mine := map[string]bool{}
	for _, scheme := range []string{schemeInternetFacing, schemeInternal} {
		mine[lbName(p.cluster, ref, NLB, scheme)] = true
	}
	var arns []string
	for _, tg := range all {
		candidate := len(tg.LoadBalancerArns) == 0
		for _, lb := range tg.LoadBalancerArns {
			candidate = candidate || mine[lbNameOfARN(lb)]
		}
		if candidate {
			arns = append(arns, aws.ToString(tg.TargetGroupArn))
		}
	}
	tags, err := p.nlbTags(ctx, arns)
	if err != nil {
		return err
	}
	for _, arn := range arns {
		if ownedBy(tags[arn], p.cluster, ref.UID) {
			if err := p.deleteTargetGroup(ctx, arn); err != nil {
				return err
			}
		}
	}
	return nil
}

// lbNameOfARN returns the name in a load balancer ARN (...:loadbalancer/net/<name>/<id>).
func lbNameOfARN(arn string) string {
	parts := strings.Split(arn, "/")
	if len(parts) < 4 {
		return ""
	}
	return parts[len(parts)-2]
}
