package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/providers"
)

// The node-set path. A node joining or leaving changes the desired model of every Service at
// once, and only its Instances. When the provider converged and verified a load balancer within
// VerifyPeriod (applied.go) and the new model differs from that one only in its instances, it
// registers the added instances and deregisters the removed ones (one call each per target
// group or Classic ELB), and records the new applied hash; no full read-back. Nodes' security
// groups need no change when every added instance is in a group seen holding the backend rule;
// otherwise, or for anything else that differs, the full convergence runs.

// instanceTTL is how long a described instance serves the node-set path: the Services that one
// new node changes all describe it once.
const instanceTTL = 10 * time.Second

type instanceCache struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]cachedInstance
}

type cachedInstance struct {
	in instance
	at time.Time
}

// describe returns ids' instances, from the cache when fresh; an instance AWS does not know is
// left out.
func (c *instanceCache) describe(ctx context.Context, p *Provider, ids []string) ([]instance, error) {
	c.mu.Lock()
	var out []instance
	var missing []string
	for _, id := range ids {
		if x, ok := c.m[id]; ok && c.now().Sub(x.at) < instanceTTL {
			out = append(out, x.in)
		} else {
			missing = append(missing, id)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := p.describeInstances(ctx, missing)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range got {
		c.m[in.ID] = cachedInstance{in: in, at: c.now()}
	}
	return append(out, got...), nil
}

// nodesOnly applies a change of the node set alone; ok is false when the full convergence must
// run instead.
func (p *Provider) nodesOnly(ctx context.Context, ref providers.Ref, d desiredLB, hash string) (*lbRecord, bool, error) {
	x, ok := p.verified.get(d.Name)
	if !ok || x.model.Name != d.Name {
		return nil, false, nil
	}
	probe := d
	probe.Instances = x.model.Instances
	if desiredHash(probe) != x.hash {
		return nil, false, nil
	}
	rec, err := p.reader(d.Kind).get(ctx, d.Name)
	if err != nil {
		return nil, false, err
	}
	if rec == nil || !ownedBy(rec.Tags, p.cluster, ref.UID) || rec.Tags[tagApplied] != x.hash || rec.Tags[tagReplaces] != "" {
		return nil, false, nil
	}
	if d.Kind == NLB && (len(rec.SecurityGroups) == 0 || len(x.targetGroups) != len(d.NLB.Listeners)) {
		// Per-Service node rules (an NLB without groups) follow the node set: full path.
		return nil, false, nil
	}
	add, remove := diffSets(x.model.Instances, d.Instances)
	if d.ManageNodeRules && len(add) > 0 {
		insts, err := p.instances.describe(ctx, p, add)
		if err != nil {
			return nil, false, err
		}
		if len(insts) != len(add) {
			return nil, false, nil
		}
		for _, in := range insts {
			if in.VPC != rec.VPC || !p.backend.allowsAny(in.Groups) {
				return nil, false, nil
			}
		}
	}
	// What the reader holds of it is stale from the first write on.
	p.reader(d.Kind).forget(d.Name)
	if d.Kind == NLB {
		for _, tg := range x.targetGroups {
			if err := p.registerTargets(ctx, tg, add, remove); err != nil {
				return nil, false, err
			}
		}
	} else if err := p.registerInstances(ctx, d.Name, add, remove); err != nil {
		return nil, false, err
	}
	if err := p.tagApplied(ctx, rec, hash); err != nil {
		return nil, false, err
	}
	p.verified.advance(d.Name, hash, d)
	p.reader(d.Kind).remember(d.Name)
	p.log.V(1).Info("Applied a node-set change", "service", ref, "name", d.Name, "added", add, "removed", remove)
	return rec, true, nil
}

// registerTargets registers add on the target group before deregistering remove.
func (p *Provider) registerTargets(ctx context.Context, tg string, add, remove []string) error {
	api := p.api.targetGroups
	if len(add) > 0 {
		if _, err := api.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(tg), Targets: targets(add)}); err != nil {
			return fmt.Errorf("registering targets with %s: %w", tg, err)
		}
	}
	if len(remove) > 0 {
		if _, err := api.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(tg), Targets: targets(remove)}); err != nil {
			return fmt.Errorf("deregistering targets from %s: %w", tg, err)
		}
	}
	return nil
}

// registerInstances registers add with the Classic ELB before deregistering remove.
func (p *Provider) registerInstances(ctx context.Context, name string, add, remove []string) error {
	if len(add) > 0 {
		if _, err := p.api.classic.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String(name), Instances: elbInstances(add)}); err != nil {
			return fmt.Errorf("registering instances with %s: %w", name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := p.api.classic.DeregisterInstancesFromLoadBalancer(ctx, &elb.DeregisterInstancesFromLoadBalancerInput{LoadBalancerName: aws.String(name), Instances: elbInstances(remove)}); err != nil {
			return fmt.Errorf("deregistering instances from %s: %w", name, err)
		}
	}
	return nil
}
