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

	"github.com/portico-lb/portico/providers"
)

const (
	proxyProtocolPolicy = "k8s-proxyprotocol-enabled"
	classicTagsBatch    = 20
)

// ensureClassic finds the Classic ELB by name or creates it (with its own security group unless
// groups are configured), then converges listeners, health check, attributes, PROXY protocol,
// security groups, instances and the node security-group rules.
func (p *Provider) ensureClassic(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*lbRecord, error) {
	cur, err := p.findClassic(ctx, d.Name)
	if err != nil {
		return nil, err
	}
	var rec *lbRecord
	var tags map[string]string
	if cur == nil {
		if cur, tags, err = p.createClassic(ctx, ref, d, insts); err != nil {
			return nil, err
		}
	} else {
		all, err := p.classicTags(ctx, []string{d.Name})
		if err != nil {
			return nil, err
		}
		tags = all[d.Name]
		if !ownedBy(tags, p.cluster, ref.UID) {
			if !adoptable(d.Name, tags, p.cluster, ref) {
				return nil, fmt.Errorf("the Classic ELB %s exists but is not tagged as owned by Service %s (uid %s) of cluster %s; not touching it", d.Name, ref, ref.UID, p.cluster)
			}
			p.log.Info("Adopting the Classic ELB of cloud-provider-aws", "service", ref, "name", d.Name)
		}
		if missing := missingTags(tags, d.Tags); len(missing) > 0 {
			if _, err := p.api.classic.AddTags(ctx, &elb.AddTagsInput{LoadBalancerNames: []string{d.Name}, Tags: toELBTags(missing)}); err != nil {
				return nil, fmt.Errorf("tagging Classic ELB %s: %w", d.Name, err)
			}
			maps.Copy(tags, missing)
		}
	}
	rec = classicRecord(cur, tags)
	steps := []func(context.Context, desiredLB, *elbtypes.LoadBalancerDescription) error{
		p.reconcileClassicSubnets,
		p.reconcileClassicListeners,
		p.reconcileClassicHealthCheck,
		p.reconcileClassicAttributes,
		p.reconcileClassicProxyProtocol,
		p.reconcileClassicSSLPolicy,
		func(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
			return p.reconcileClassicInstances(ctx, d, cur, instanceIDsOf(insts))
		},
	}
	for _, step := range steps {
		if err := step(ctx, d, cur); err != nil {
			return nil, err
		}
	}
	if err := p.reconcileClassicSecurity(ctx, ref, d, cur, insts); err != nil {
		return nil, err
	}
	return rec, nil
}

func (p *Provider) createClassic(ctx context.Context, ref providers.Ref, d desiredLB, insts []instance) (*elbtypes.LoadBalancerDescription, map[string]string, error) {
	olds, err := p.findOwnedLBs(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	vpc := vpcOf(insts)
	if vpc == "" && len(olds) > 0 {
		vpc = olds[0].VPC
	}
	subnets, err := p.resolveSubnets(ctx, d, vpc)
	if err != nil {
		return nil, nil, err
	}
	if vpc == "" && len(subnets) > 0 {
		vpc = subnets[0].VPC
	}
	groups := slices.Clone(d.Classic.SecurityGroups)
	if len(groups) == 0 {
		g, err := p.ensureOwnSecurityGroup(ctx, d, vpc)
		if err != nil {
			return nil, nil, err
		}
		groups = []string{aws.ToString(g.GroupId)}
	}
	groups, backend, err := p.attachedGroups(ctx, d, vpc, nil, append(groups, d.Classic.ExtraSecurityGroups...))
	if err != nil {
		return nil, nil, err
	}
	if backend != "" && d.ManageNodeRules {
		// The node rule goes first: the load balancer serves as soon as it exists.
		if err := p.allowBackendOnNodes(ctx, insts, backend); err != nil {
			return nil, nil, err
		}
	}
	tags := maps.Clone(d.Tags)
	if v := replacedValue(olds, d.Name); v != "" {
		tags[tagReplaces] = v
	}
	in := &elb.CreateLoadBalancerInput{
		LoadBalancerName: aws.String(d.Name),
		Listeners:        classicListeners(d.Classic.Listeners),
		Subnets:          subnetIDs(subnets),
		SecurityGroups:   groups,
		Tags:             toELBTags(tags),
	}
	if d.Scheme == schemeInternal {
		in.Scheme = aws.String(schemeInternal)
	}
	out, err := p.api.classic.CreateLoadBalancer(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("creating Classic ELB %s: %w", d.Name, err)
	}
	p.log.Info("Created Classic ELB", "service", ref, "name", d.Name, "scheme", d.Scheme, "replaces", tags[tagReplaces])
	cur, err := p.findClassic(ctx, d.Name)
	if err != nil {
		return nil, nil, err
	}
	if cur == nil {
		cur = &elbtypes.LoadBalancerDescription{LoadBalancerName: aws.String(d.Name), DNSName: out.DNSName, VPCId: aws.String(vpc),
			Subnets: subnetIDs(subnets), SecurityGroups: groups, Scheme: aws.String(d.Scheme)}
	}
	return cur, tags, nil
}

func classicRecord(cur *elbtypes.LoadBalancerDescription, tags map[string]string) *lbRecord {
	rec := &lbRecord{
		Kind:    Classic,
		Name:    aws.ToString(cur.LoadBalancerName),
		DNSName: aws.ToString(cur.DNSName),
		Scheme:  aws.ToString(cur.Scheme),
		VPC:     aws.ToString(cur.VPCId),
		Subnets: slices.Sorted(slices.Values(cur.Subnets)),
		Tags:    tags,

		SecurityGroups: slices.Sorted(slices.Values(cur.SecurityGroups)),
	}
	return rec
}

// findClassic describes the Classic ELB named name; nil when there is none.
func (p *Provider) findClassic(ctx context.Context, name string) (*elbtypes.LoadBalancerDescription, error) {
	out, err := p.api.classic.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
	if isCode(err, "LoadBalancerNotFound", "AccessPointNotFound") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing Classic ELB %s: %w", name, err)
	}
	if len(out.LoadBalancerDescriptions) == 0 {
		return nil, nil
	}
	return &out.LoadBalancerDescriptions[0], nil
}

// reconcileClassicSubnets attaches and detaches subnets when the Service or configuration names
// them; discovered subnets are chosen once, at creation.
func (p *Provider) reconcileClassicSubnets(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	if len(d.Subnets) == 0 {
		return nil
	}
	want, err := p.namedSubnets(ctx, d.Subnets)
	if err != nil {
		return err
	}
	add, remove := diffSets(cur.Subnets, subnetIDs(want))
	if len(add) > 0 {
		if _, err := p.api.classic.AttachLoadBalancerToSubnets(ctx, &elb.AttachLoadBalancerToSubnetsInput{LoadBalancerName: aws.String(d.Name), Subnets: add}); err != nil {
			return fmt.Errorf("attaching %s to subnets: %w", d.Name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := p.api.classic.DetachLoadBalancerFromSubnets(ctx, &elb.DetachLoadBalancerFromSubnetsInput{LoadBalancerName: aws.String(d.Name), Subnets: remove}); err != nil {
			return fmt.Errorf("detaching %s from subnets: %w", d.Name, err)
		}
	}
	return nil
}

// reconcileClassicListeners deletes listeners that differ or are not wanted, then creates the
// missing ones (a Classic listener cannot be modified).
func (p *Provider) reconcileClassicListeners(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	have := map[int32]elbtypes.Listener{}
	for _, ld := range cur.ListenerDescriptions {
		if ld.Listener != nil {
			have[ld.Listener.LoadBalancerPort] = *ld.Listener
		}
	}
	var drop []int32
	var create []classicListener
	want := map[int32]bool{}
	for _, l := range d.Classic.Listeners {
		want[l.Port] = true
		h, ok := have[l.Port]
		if ok && classicListenerEqual(h, l) {
			continue
		}
		if ok {
			drop = append(drop, l.Port)
		}
		create = append(create, l)
	}
	for port := range have {
		if !want[port] {
			drop = append(drop, port)
		}
	}
	if len(drop) > 0 {
		slices.Sort(drop)
		if _, err := p.api.classic.DeleteLoadBalancerListeners(ctx, &elb.DeleteLoadBalancerListenersInput{LoadBalancerName: aws.String(d.Name), LoadBalancerPorts: drop}); err != nil {
			return fmt.Errorf("deleting listeners %v of %s: %w", drop, d.Name, err)
		}
	}
	if len(create) > 0 {
		if _, err := p.api.classic.CreateLoadBalancerListeners(ctx, &elb.CreateLoadBalancerListenersInput{LoadBalancerName: aws.String(d.Name), Listeners: classicListeners(create)}); err != nil {
			return fmt.Errorf("creating listeners of %s: %w", d.Name, err)
		}
	}
	// What the next steps read: the listeners as they are now, new ones without policies.
	if len(drop) > 0 || len(create) > 0 {
		var now []elbtypes.ListenerDescription
		for _, ld := range cur.ListenerDescriptions {
			if ld.Listener != nil && want[ld.Listener.LoadBalancerPort] && !slices.Contains(drop, ld.Listener.LoadBalancerPort) {
				now = append(now, ld)
			}
		}
		for _, l := range classicListeners(create) {
			now = append(now, elbtypes.ListenerDescription{Listener: &l})
		}
		cur.ListenerDescriptions = now
	}
	return nil
}

// reconcileClassicSSLPolicy puts the requested predefined TLS policy on every SSL and HTTPS
// listener, through a policy of type SSLNegotiationPolicyType named after it.
func (p *Provider) reconcileClassicSSLPolicy(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	if d.Classic.SSLPolicy == "" {
		return nil
	}
	name := "k8s-SSLNegotiationPolicy-" + d.Classic.SSLPolicy
	created := cur.Policies != nil && slices.Contains(cur.Policies.OtherPolicies, name)
	for _, ld := range cur.ListenerDescriptions {
		l := ld.Listener
		if l == nil || (aws.ToString(l.Protocol) != "SSL" && aws.ToString(l.Protocol) != "HTTPS") || slices.Contains(ld.PolicyNames, name) {
			continue
		}
		if !created {
			_, err := p.api.classic.CreateLoadBalancerPolicy(ctx, &elb.CreateLoadBalancerPolicyInput{
				LoadBalancerName: aws.String(d.Name),
				PolicyName:       aws.String(name),
				PolicyTypeName:   aws.String("SSLNegotiationPolicyType"),
				PolicyAttributes: []elbtypes.PolicyAttribute{{AttributeName: aws.String("Reference-Security-Policy"), AttributeValue: aws.String(d.Classic.SSLPolicy)}},
			})
			if err != nil && !isCode(err, "DuplicatePolicyName") {
				return fmt.Errorf("creating TLS policy %s of %s: %w", d.Classic.SSLPolicy, d.Name, err)
			}
			created = true
		}
		_, err := p.api.classic.SetLoadBalancerPoliciesOfListener(ctx, &elb.SetLoadBalancerPoliciesOfListenerInput{
			LoadBalancerName: aws.String(d.Name), LoadBalancerPort: l.LoadBalancerPort, PolicyNames: []string{name},
		})
		if err != nil {
			return fmt.Errorf("setting TLS policy of %s port %d: %w", d.Name, l.LoadBalancerPort, err)
		}
	}
	return nil
}

func classicListenerEqual(h elbtypes.Listener, l classicListener) bool {
	return strings.EqualFold(aws.ToString(h.Protocol), l.Protocol) &&
		h.InstancePort != nil && *h.InstancePort == l.InstancePort &&
		strings.EqualFold(aws.ToString(h.InstanceProtocol), l.InstanceProtocol) &&
		aws.ToString(h.SSLCertificateId) == l.CertARN
}

func classicListeners(ls []classicListener) []elbtypes.Listener {
	out := make([]elbtypes.Listener, len(ls))
	for i, l := range ls {
		out[i] = elbtypes.Listener{
			LoadBalancerPort: l.Port,
			Protocol:         aws.String(l.Protocol),
			InstancePort:     aws.Int32(l.InstancePort),
			InstanceProtocol: aws.String(l.InstanceProtocol),
		}
		if l.CertARN != "" {
			out[i].SSLCertificateId = aws.String(l.CertARN)
		}
	}
	return out
}

func (p *Provider) reconcileClassicHealthCheck(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	hc := d.Classic.HealthCheck
	if h := cur.HealthCheck; h != nil && aws.ToString(h.Target) == hc.Target && aws.ToInt32(h.Interval) == hc.Interval &&
		aws.ToInt32(h.Timeout) == hc.Timeout && aws.ToInt32(h.HealthyThreshold) == hc.Healthy && aws.ToInt32(h.UnhealthyThreshold) == hc.Unhealthy {
		return nil
	}
	_, err := p.api.classic.ConfigureHealthCheck(ctx, &elb.ConfigureHealthCheckInput{
		LoadBalancerName: aws.String(d.Name),
		HealthCheck: &elbtypes.HealthCheck{
			Target: aws.String(hc.Target), Interval: aws.Int32(hc.Interval), Timeout: aws.Int32(hc.Timeout),
			HealthyThreshold: aws.Int32(hc.Healthy), UnhealthyThreshold: aws.Int32(hc.Unhealthy),
		},
	})
	if err != nil {
		return fmt.Errorf("configuring health check of %s: %w", d.Name, err)
	}
	return nil
}

// reconcileClassicAttributes converges every attribute the provider manages (cross-zone, idle
// timeout, connection draining, access logs): a key the Service does not set holds its default,
// so removing an annotation restores it.
func (p *Provider) reconcileClassicAttributes(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	out, err := p.api.classic.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(d.Name)})
	if err != nil {
		return fmt.Errorf("describing attributes of %s: %w", d.Name, err)
	}
	change, changed := classicAttributeChange(d.Classic, out.LoadBalancerAttributes)
	if !changed {
		return nil
	}
	if _, err := p.api.classic.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerName: aws.String(d.Name), LoadBalancerAttributes: change}); err != nil {
		return fmt.Errorf("modifying attributes of %s: %w", d.Name, err)
	}
	return nil
}

// classicAttributeChange returns the attributes of c that differ from have, and whether any
// does. A missing cross-zone or access-log part reads as off (AWS's default); a missing timeout
// differs from any.
func classicAttributeChange(c classicSpec, have *elbtypes.LoadBalancerAttributes) (*elbtypes.LoadBalancerAttributes, bool) {
	if have == nil {
		have = &elbtypes.LoadBalancerAttributes{}
	}
	var change elbtypes.LoadBalancerAttributes
	changed := false
	haveCrossZone := have.CrossZoneLoadBalancing != nil && have.CrossZoneLoadBalancing.Enabled
	if haveCrossZone != c.CrossZone {
		change.CrossZoneLoadBalancing = &elbtypes.CrossZoneLoadBalancing{Enabled: c.CrossZone}
		changed = true
	}
	// AWS always describes the idle and draining timeouts; a value missing (moto leaves the
	// draining timeout unset on a new ELB) is written.
	haveIdle := int32(0)
	if have.ConnectionSettings != nil && have.ConnectionSettings.IdleTimeout != nil {
		haveIdle = *have.ConnectionSettings.IdleTimeout
	}
	if haveIdle != c.IdleTimeout {
		change.ConnectionSettings = &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(c.IdleTimeout)}
		changed = true
	}
	haveDrain, haveDrainTimeout := false, int32(0)
	if h := have.ConnectionDraining; h != nil {
		haveDrain = h.Enabled
		if h.Timeout != nil {
			haveDrainTimeout = *h.Timeout
		}
	}
	if haveDrain != c.Draining || haveDrainTimeout != c.DrainingTimeout {
		change.ConnectionDraining = &elbtypes.ConnectionDraining{Enabled: c.Draining, Timeout: aws.Int32(c.DrainingTimeout)}
		changed = true
	}
	want, h := c.AccessLog, have.AccessLog
	if h == nil {
		h = &elbtypes.AccessLog{}
	}
	haveInterval := aws.ToInt32(h.EmitInterval)
	if haveInterval == 0 {
		haveInterval = classicDefaultEmitInterval
	}
	switch {
	case !want.Enabled && h.Enabled:
		change.AccessLog = &elbtypes.AccessLog{Enabled: false}
		changed = true
	case want.Enabled && (!h.Enabled || haveInterval != want.EmitInterval ||
		aws.ToString(h.S3BucketName) != want.Bucket || aws.ToString(h.S3BucketPrefix) != want.Prefix):
		change.AccessLog = &elbtypes.AccessLog{Enabled: true, EmitInterval: aws.Int32(want.EmitInterval), S3BucketName: aws.String(want.Bucket), S3BucketPrefix: aws.String(want.Prefix)}
		changed = true
	}
	return &change, changed
}

// reconcileClassicProxyProtocol puts the PROXY protocol policy on every backend port, or takes
// it off.
func (p *Provider) reconcileClassicProxyProtocol(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription) error {
	if d.Classic.ProxyProtocol && (cur.Policies == nil || !slices.Contains(cur.Policies.OtherPolicies, proxyProtocolPolicy)) {
		_, err := p.api.classic.CreateLoadBalancerPolicy(ctx, &elb.CreateLoadBalancerPolicyInput{
			LoadBalancerName: aws.String(d.Name),
			PolicyName:       aws.String(proxyProtocolPolicy),
			PolicyTypeName:   aws.String("ProxyProtocolPolicyType"),
			PolicyAttributes: []elbtypes.PolicyAttribute{{AttributeName: aws.String("ProxyProtocol"), AttributeValue: aws.String("true")}},
		})
		if err != nil && !isCode(err, "DuplicatePolicyName") {
			return fmt.Errorf("creating PROXY protocol policy of %s: %w", d.Name, err)
		}
	}
	have := map[int32]bool{}
	for _, b := range cur.BackendServerDescriptions {
		have[aws.ToInt32(b.InstancePort)] = slices.Contains(b.PolicyNames, proxyProtocolPolicy)
	}
	ports := map[int32]bool{}
	for _, l := range d.Classic.Listeners {
		ports[l.InstancePort] = true
	}
	for port := range have {
		ports[port] = true
	}
	for _, port := range slices.Sorted(maps.Keys(ports)) {
		want := d.Classic.ProxyProtocol && slices.ContainsFunc(d.Classic.Listeners, func(l classicListener) bool { return l.InstancePort == port })
		if have[port] == want {
			continue
		}
		names := []string{}
		if want {
			names = []string{proxyProtocolPolicy}
		}
		_, err := p.api.classic.SetLoadBalancerPoliciesForBackendServer(ctx, &elb.SetLoadBalancerPoliciesForBackendServerInput{
			LoadBalancerName: aws.String(d.Name), InstancePort: aws.Int32(port), PolicyNames: names,
		})
		if err != nil {
			return fmt.Errorf("setting backend policies of %s port %d: %w", d.Name, port, err)
		}
	}
	return nil
}

func (p *Provider) reconcileClassicInstances(ctx context.Context, d desiredLB, cur *elbtypes.LoadBalancerDescription, want []string) error {
	var have []string
	for _, in := range cur.Instances {
		have = append(have, aws.ToString(in.InstanceId))
	}
	add, remove := diffSets(have, want)
	if len(add) > 0 {
		if _, err := p.api.classic.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String(d.Name), Instances: elbInstances(add)}); err != nil {
			return fmt.Errorf("registering instances with %s: %w", d.Name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := p.api.classic.DeregisterInstancesFromLoadBalancer(ctx, &elb.DeregisterInstancesFromLoadBalancerInput{LoadBalancerName: aws.String(d.Name), Instances: elbInstances(remove)}); err != nil {
			return fmt.Errorf("deregistering instances from %s: %w", d.Name, err)
		}
	}
	return nil
}

func elbInstances(ids []string) []elbtypes.Instance {
	out := make([]elbtypes.Instance, len(ids))
	for i, id := range ids {
		out[i] = elbtypes.Instance{InstanceId: aws.String(id)}
	}
	return out
}

// reconcileClassicSecurity converges the load balancer's security groups (its own, or the
// configured ones, the extra ones and the cluster's backend group), its own groups' rules
// (split across groups when the source ranges need more rules than one group holds), and the
// node groups' rule letting the backend group in (backendsg.go). A group no longer needed is
// detached, unreferenced, then deleted.
func (p *Provider) reconcileClassicSecurity(ctx context.Context, ref providers.Ref, d desiredLB, cur *elbtypes.LoadBalancerDescription, insts []instance) error {
	vpc := aws.ToString(cur.VPCId)
	groups := slices.Clone(d.Classic.SecurityGroups)
	var extra []ec2types.SecurityGroup
	if len(groups) == 0 {
		// desired checked that the groups, with the extra and backend ones, are at most
		// maxClassicGroups.
		var err error
		if groups, extra, err = p.convergeOwnGroups(ctx, ref, d, vpc, classicRules(d)); err != nil {
			return err
		}
	}
	from := slices.Concat(groups, d.Classic.ExtraSecurityGroups)
	groups, backend, err := p.attachedGroups(ctx, d, vpc, cur.SecurityGroups, from)
	if err != nil {
		return err
	}
	if d.ManageNodeRules {
		// Before the group is attached, so that the load balancer never lacks the rule.
		if err := p.allowBackendOnNodes(ctx, insts, backend); err != nil {
			return err
		}
	}
	if a := slices.Sorted(slices.Values(cur.SecurityGroups)); !slices.Equal(a, groups) {
		if _, err := p.api.classic.ApplySecurityGroupsToLoadBalancer(ctx, &elb.ApplySecurityGroupsToLoadBalancerInput{LoadBalancerName: aws.String(d.Name), SecurityGroups: groups}); err != nil {
			return fmt.Errorf("applying security groups to %s: %w", d.Name, err)
		}
		cur.SecurityGroups = groups
	}
	if !d.ManageNodeRules {
		// The extra groups may still be referenced from the nodes: leave them for Delete.
		return nil
	}
	// Rules an older Portico added to node groups for this load balancer alone (one per group
	// of the load balancer), and rules letting in a group about to be deleted.
	for _, g := range extra {
		from = append(from, aws.ToString(g.GroupId))
	}
	if err := p.revokeStaleNodeRules(ctx, ref.UID, d.Name, vpc, nil, []ec2Filter{{Name: aws.String("ip-permission.group-id"), Values: from}}); err != nil {
		return err
	}
	for _, g := range extra {
		if err := p.deleteSecurityGroup(ctx, aws.ToString(g.GroupId)); err != nil {
			return err
		}
	}
	return nil
}

// deleteClassic deletes the Classic ELB named name. Its security group goes afterwards
// (deleteOwnedSecurityGroups), once the node rules that reference it are revoked.
func (p *Provider) deleteClassic(ctx context.Context, name string) error {
	_, err := p.api.classic.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String(name)})
	if err != nil && !isCode(err, "LoadBalancerNotFound", "AccessPointNotFound") {
		return fmt.Errorf("deleting Classic ELB %s: %w", name, err)
	}
	return nil
}
