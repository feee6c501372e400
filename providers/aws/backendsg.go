package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/providers"
)

// The shared backend security group. Every load balancer that lets its traffic into the nodes
// (Classic ELBs, and NLBs created with security groups) carries, besides its own frontend
// groups, one security group per cluster and VPC, k8s-portico-backend-<hash>. Each node
// security group holds a single rule for all of them: all traffic from that group. So the
// node groups' rule count does not grow with the number of Services.
//
// Who may reach a node port is still decided per load balancer: its own frontend groups admit
// only loadBalancerSourceRanges on its listener ports, and a load balancer forwards only to
// the node ports of its own listeners. cloud-provider-aws lets every Classic ELB's group in on
// all protocols; the AWS Load Balancer Controller lets its shared backend group in on one port
// span per protocol. Only the provider's load balancers carry the group.
//
// Ownership: the group is tagged kubernetes.io/cluster/<cluster>=owned and
// portico-lb.io/resource=backend-sg (no Service uid: it is shared); the node rule is described
// "portico/backend/<cluster hash>/traffic". Neither belongs to one Service. They are removed by
// the garbage collection that ends every Delete (and every finished replacement): when no load
// balancer of either kind carries the group any more, the node rules go, then the group. A
// crash anywhere leaves the Service's finalizer, so the retried Delete collects them; nothing is
// ever left without a Service that will collect it.
//
// Within one provider, converging load balancers (which attach the group) and collecting it
// exclude each other (backendGroups.use). Two processes sharing a cluster name (portico-ccm and
// portico-controller with a class) can race: a collection that finds the group attached again
// after revoking its rules restores them.

const (
	tagResource        = "portico-lb.io/resource"
	resourceBackendSG  = "backend-sg"
	backendRuleOwner   = "backend"
	backendRulePurpose = "traffic"
)

// backendGroups caches the backend group per VPC and orders its use against its collection.
type backendGroups struct {
	// use is held for reading while a load balancer is converged (the group is found or
	// created, its node rules added and the group attached) and for writing while unused
	// groups are collected.
	use sync.RWMutex

	mu  sync.Mutex
	ids map[string]string // VPC -> group ID
	// allowed are the node groups seen holding the backend rule (nodeset.go).
	allowed map[string]bool
}

func (b *backendGroups) forget() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.ids)
	clear(b.allowed)
}

func (b *backendGroups) allow(group string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed[group] = true
}

// allowsAny reports whether one of groups was seen holding the backend rule since the last
// forget.
func (b *backendGroups) allowsAny(groups []string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.ContainsFunc(groups, func(g string) bool { return b.allowed[g] })
}

// backendGroupName is the backend group's name for a cluster and VPC.
func backendGroupName(cluster, vpc string) string {
	return "k8s-portico-backend-" + hash(cluster, vpc)[:16]
}

// backendRuleDescription marks the node rule letting the backend group in.
func backendRuleDescription(cluster string) string {
	return rulePrefix + backendRuleOwner + "/" + hash(cluster)[:12] + "/" + backendRulePurpose
}

// backendGroup returns the ID of the cluster's backend group in vpc, creating it when create
// is set; "" when it does not exist and create is not set.
func (p *Provider) backendGroup(ctx context.Context, vpc string, create bool) (string, error) {
	if vpc == "" {
		return "", errors.New("no VPC known for the backend security group")
	}
	b := p.backend
	b.mu.Lock()
	defer b.mu.Unlock()
	if id := b.ids[vpc]; id != "" {
		return id, nil
	}
	name := backendGroupName(p.cluster, vpc)
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("group-name"), Values: []string{name}},
		{Name: aws.String("vpc-id"), Values: []string{vpc}},
	}})
	if err != nil {
		return "", err
	}
	if len(groups) > 0 {
		g := groups[0]
		t := ec2Tags(g.Tags)
		if t[clusterTag(p.cluster)] != tagOwned || t[tagResource] != resourceBackendSG {
			return "", fmt.Errorf("security group %s (%s) exists but is not tagged %s=%s and %s=%s; not using it", name, aws.ToString(g.GroupId), clusterTag(p.cluster), tagOwned, tagResource, resourceBackendSG)
		}
		b.ids[vpc] = aws.ToString(g.GroupId)
		return b.ids[vpc], nil
	}
	if !create {
		return "", nil
	}
	tags := maps.Clone(p.opts.ExtraTags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[clusterTag(p.cluster)] = tagOwned
	tags[tagResource] = resourceBackendSG
	out, err := p.api.groups.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName:   aws.String(name),
		Description: aws.String("Portico: load balancers of cluster " + p.cluster + " to the nodes"),
		VpcId:       aws.String(vpc),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: toEC2Tags(tags),
		}},
	})
	if err != nil {
		return "", fmt.Errorf("creating the backend security group %s: %w", name, err)
	}
	p.log.Info("Created the backend security group", "id", aws.ToString(out.GroupId), "vpc", vpc)
	b.ids[vpc] = aws.ToString(out.GroupId)
	return b.ids[vpc], nil
}

// backendPermission is the node rule letting the backend group in.
func (p *Provider) backendPermission(backend string) ec2types.IpPermission {
	return ec2types.IpPermission{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{
		GroupId: aws.String(backend), Description: aws.String(backendRuleDescription(p.cluster)),
	}}}
}

// hasBackendRule reports whether g lets every protocol in from the backend group.
func hasBackendRule(g ec2types.SecurityGroup, backend string) bool {
	for _, perm := range g.IpPermissions {
		if aws.ToString(perm.IpProtocol) != "-1" {
			continue
		}
		for _, pair := range perm.UserIdGroupPairs {
			if aws.ToString(pair.GroupId) == backend {
				return true
			}
		}
	}
	return false
}

// allowBackend adds the backend rule to the node groups that lack it (read from groups, no
// call when all have it).
func (p *Provider) allowBackend(ctx context.Context, groups []ec2types.SecurityGroup, backend string) error {
	for _, g := range groups {
		id := aws.ToString(g.GroupId)
		if hasBackendRule(g, backend) {
			p.backend.allow(id)
			continue
		}
		_, err := p.api.groups.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
			GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{p.backendPermission(backend)},
		})
		if isCode(err, "RulesPerSecurityGroupLimitExceeded") {
			return fmt.Errorf("adding the backend rule to security group %s exceeds the account's rules-per-group quota: %w", id, err)
		}
		if err != nil && !isCode(err, "InvalidPermission.Duplicate") {
			return fmt.Errorf("adding the backend rule to security group %s: %w", id, err)
		}
		p.backend.allow(id)
	}
	return nil
}

// allowBackendOnNodes adds the backend rule to the security groups of insts that lack it.
func (p *Provider) allowBackendOnNodes(ctx context.Context, insts []instance, backend string) error {
	groups, err := p.nodeSecurityGroups(ctx, insts)
	if err != nil {
		return err
	}
	return p.allowBackend(ctx, groups, backend)
}

// collectBackendGroups removes every backend group of the cluster that no load balancer
// carries any more: first the node rules referencing it, then the group. It runs at the end of
// every Delete and finished replacement, so a crash in between is collected by the retry.
func (p *Provider) collectBackendGroups(ctx context.Context) error {
	p.backend.use.Lock()
	defer p.backend.use.Unlock()
	groups, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("tag:" + clusterTag(p.cluster)), Values: []string{tagOwned}},
		{Name: aws.String("tag:" + tagResource), Values: []string{resourceBackendSG}},
	}})
	if err != nil || len(groups) == 0 {
		return err
	}
	var used map[string]bool
	for _, g := range groups {
		id := aws.ToString(g.GroupId)
		if inUse, err := p.knownUser(ctx, id); err != nil || inUse {
			if err != nil {
				return err
			}
			continue
		}
		if used == nil {
			if used, err = p.groupsOfLoadBalancers(ctx); err != nil {
				return err
			}
		}
		if used[id] {
			continue
		}
		p.backend.forget()
		revoked, err := p.revokeBackendRules(ctx, id)
		if err != nil {
			return err
		}
		_, err = p.api.groups.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
		switch {
		case isCode(err, "DependencyViolation"):
			// A load balancer being deleted still lets go of it (its network interfaces),
			// or another process attached it meanwhile: then its rules come back.
			if used, uerr := p.groupsOfLoadBalancers(ctx); uerr == nil && used[id] {
				if rerr := p.allowBackend(ctx, revoked, id); rerr != nil {
					return rerr
				}
				continue
			}
			return providers.RetryAfter(retryDetach, "the backend security group %s is still in use while a load balancer lets go of it", id)
		case err != nil && !isCode(err, "InvalidGroup.NotFound"):
			return fmt.Errorf("deleting the backend security group %s: %w", id, err)
		}
		p.log.Info("Deleted the backend security group: no load balancer uses it", "id", id)
	}
	return nil
}

// knownUserTries is how many load balancers the provider converged lately knownUser asks about.
const knownUserTries = 3

// knownUser reports whether one of the load balancers this provider converged lately still
// exists and carries group: a few reads by name instead of listing the region's load
// balancers. Any load balancer it finds will run its own collection when it is deleted.
func (p *Provider) knownUser(ctx context.Context, group string) (bool, error) {
	for _, m := range p.verified.models(knownUserTries) {
		groups, err := p.lbSecurityGroups(ctx, m.Kind, m.Name)
		if err != nil {
			return false, err
		}
		if slices.Contains(groups, group) {
			return true, nil
		}
	}
	return false, nil
}

// lbSecurityGroups returns the security groups of the load balancer of kind named name; none
// when there is no such load balancer.
func (p *Provider) lbSecurityGroups(ctx context.Context, kind Kind, name string) ([]string, error) {
	if kind == NLB {
		lb, err := p.findNLB(ctx, name)
		if err != nil || lb == nil {
			return nil, err
		}
		return lb.SecurityGroups, nil
	}
	lb, err := p.findClassic(ctx, name)
	if err != nil || lb == nil {
		return nil, err
	}
	return lb.SecurityGroups, nil
}

// revokeBackendRules revokes every rule referencing the backend group (which must go before the
// group can) and returns the groups that held the backend rule.
func (p *Provider) revokeBackendRules(ctx context.Context, backend string) ([]ec2types.SecurityGroup, error) {
	holders, err := p.describeGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{
		{Name: aws.String("ip-permission.group-id"), Values: []string{backend}},
	}})
	if err != nil {
		return nil, err
	}
	var out []ec2types.SecurityGroup
	for _, h := range holders {
		var perms []ec2types.IpPermission
		for _, perm := range h.IpPermissions {
			for _, pair := range perm.UserIdGroupPairs {
				if aws.ToString(pair.GroupId) == backend {
					// As described (moto matches the description too).
					perms = append(perms, ec2types.IpPermission{IpProtocol: perm.IpProtocol, FromPort: perm.FromPort, ToPort: perm.ToPort,
						UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: pair.GroupId, Description: pair.Description}}})
				}
			}
		}
		if len(perms) == 0 {
			continue
		}
		if hasBackendRule(h, backend) {
			h.IpPermissions = nil // what allowBackend restores: the rule alone
			out = append(out, h)
		}
		_, err := p.api.groups.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{
			GroupId: h.GroupId, IpPermissions: perms,
		})
		if err != nil && !isCode(err, "InvalidPermission.NotFound", "InvalidGroup.NotFound") {
			return nil, fmt.Errorf("removing the backend rule from security group %s: %w", aws.ToString(h.GroupId), err)
		}
	}
	return out, nil
}

// groupsOfLoadBalancers returns the security groups carried by any load balancer of the
// region, of either kind (one paged listing each).
func (p *Provider) groupsOfLoadBalancers(ctx context.Context) (map[string]bool, error) {
	used := map[string]bool{}
	pager := elb.NewDescribeLoadBalancersPaginator(p.api.classic, &elb.DescribeLoadBalancersInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing Classic ELBs: %w", err)
		}
		for _, lb := range page.LoadBalancerDescriptions {
			for _, g := range lb.SecurityGroups {
				used[g] = true
			}
		}
	}
	pager2 := elbv2.NewDescribeLoadBalancersPaginator(p.api.nlb, &elbv2.DescribeLoadBalancersInput{})
	for pager2.HasMorePages() {
		page, err := pager2.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing NLBs: %w", err)
		}
		for _, lb := range page.LoadBalancers {
			for _, g := range lb.SecurityGroups {
				used[g] = true
			}
		}
	}
	return used, nil
}

// attachedGroups returns the groups a load balancer should carry: want (its frontend and
// given groups) plus the backend group when it manages node rules, or, when it does not, the
// backend group if it already carries it (left alone).
func (p *Provider) attachedGroups(ctx context.Context, d desiredLB, vpc string, have, want []string) ([]string, string, error) {
	backend, err := p.backendGroup(ctx, vpc, d.ManageNodeRules)
	if err != nil {
		return nil, "", err
	}
	out := slices.Clone(want)
	if backend != "" && (d.ManageNodeRules || slices.Contains(have, backend)) {
		out = append(out, backend)
	}
	slices.Sort(out)
	return slices.Compact(out), backend, nil
}
