package aws

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// desired: the pure step from the complete desired load balancer and the Service's AWS options
// to desiredLB, the resources AWS should hold. It makes no AWS call. The kind-specific parts are
// in desired_nlb.go and desired_classic.go, the security-group rules in sgrules.go.

// desired computes the AWS resources for lb, or an *providers.InvalidError for input AWS cannot
// serve. It makes no AWS call.
func (p *Provider) desired(lb *providers.LoadBalancer) (desiredLB, error) {
	spec, err := optionsOf(lb)
	if err != nil {
		return desiredLB{}, err
	}
	kind := p.opts.DefaultType
	if kind == "" {
		kind = Classic
	}
	// The type annotation can only ask for nlb; its absence means the configured default.
	if spec.Kind == NLB {
		kind = NLB
	}
	if err := validate(lb, kind); err != nil {
		return desiredLB{}, err
	}
	scheme := schemeInternetFacing
	if lb.Internal {
		scheme = schemeInternal
	}
	name := lbName(p.opts.ClusterName, lb.Ref, kind, scheme)
	if adopted, ok := adoptedName(lb.Ref, kind, scheme, lb.CurrentHostnames); ok {
		name = adopted
	}
	d := desiredLB{
		Kind:        kind,
		Name:        name,
		Scheme:      scheme,
		Tags:        resourceTags(p.opts.ClusterName, lb.Ref, p.opts.ExtraTags, spec),
		Subnets:     slices.Clone(spec.Subnets),
		SourceCIDRs: slices.Clone(lb.SourceRanges),

		ManageNodeRules: spec.ManageBackendSecurityGroupRules == nil || *spec.ManageBackendSecurityGroupRules,
	}
	if len(d.Subnets) == 0 {
		d.Subnets = slices.Clone(p.opts.Subnets)
	}
	if len(d.SourceCIDRs) == 0 {
		d.SourceCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
		if kind == NLB && spec.IPAddressType == "dualstack" {
			d.SourceCIDRs = append(d.SourceCIDRs, netip.MustParsePrefix("::/0"))
		}
	}
	if err := validateAccessLog(spec.AccessLog); err != nil {
		return desiredLB{}, err
	}
	instances, warnings := instanceIDs(lb.Nodes, spec.TargetNodeLabels)
	d.Instances = instances
	d.Warnings = append(d.Warnings, warnings...)
	switch kind {
	case NLB:
		d.NLB, err = nlbDesired(d.Name, lb, spec)
		if err == nil && len(d.NLB.Listeners) > 0 {
			err = checkHealthCheck(NLB, d.NLB.Listeners[0].TG.HC.Interval, d.NLB.Listeners[0].TG.HC.Timeout)
		}
		if err == nil {
			err = nlbAddresses(&d.NLB, spec, scheme)
		}
		d.Warnings = append(d.Warnings, nlbWarnings(spec)...)
		d.Warnings = append(d.Warnings, tgAttributeWarnings(d.NLB, spec.TargetGroupAttributes)...)
		if err == nil {
			err = checkNLBGroups(d)
		}
	default:
		d.Classic = classicDesired(lb, spec, p.opts.SecurityGroups)
		d.Warnings = append(d.Warnings, classicWarnings(spec)...)
		err = checkHealthCheck(Classic, d.Classic.HealthCheck.Interval, d.Classic.HealthCheck.Timeout)
		if err == nil {
			err = checkClassicGroups(d)
		}
	}
	if err != nil {
		return desiredLB{}, err
	}
	if spec.SSLCert != "" && !slices.ContainsFunc(lb.Ports, func(pt providers.Port) bool { return sslPort(spec, pt) }) {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s names no port of the Service (%v): no listener uses the certificate", annotations.AWSSSLPorts, spec.SSLPorts))
	}
	return d, nil
}

// validate rejects what AWS cannot serve before anything is created.
func validate(lb *providers.LoadBalancer, kind Kind) error {
	if lb.SessionAffinity.ClientIP {
		return providers.Invalid("spec.sessionAffinity", "AWS load balancers do not support ClientIP affinity")
	}
	if len(lb.RequestedIPs) > 0 {
		return providers.Invalid("spec.loadBalancerIP", "AWS load balancers cannot be given an IP this way")
	}
	for _, f := range lb.IPFamilies {
		if f != providers.IPv4 {
			return providers.Invalid("spec.ipFamilies", "the AWS provider serves IPv4 only")
		}
	}
	if len(lb.Ports) == 0 {
		return providers.Invalid("spec.ports", "a load balancer needs at least one port")
	}
	for i, pt := range lb.Ports {
		path := fmt.Sprintf("spec.ports[%d]", i)
		if pt.NodePort == 0 {
			return providers.Invalid(path+".nodePort", "AWS load balancers forward to node ports; allocateLoadBalancerNodePorts must not be false")
		}
		switch {
		case pt.Protocol == providers.TCP:
		case pt.Protocol == providers.UDP && kind == NLB:
		case pt.Protocol == providers.UDP:
			return providers.Invalid(path+".protocol", "a Classic ELB serves TCP only; set %s: nlb for UDP", annotations.AWSLoadBalancerType)
		default:
			return providers.Invalid(path+".protocol", "AWS load balancers do not serve %s", pt.Protocol)
		}
	}
	return nil
}

// instanceIDs maps nodes to EC2 instances through spec.providerID (aws:///zone/i-...), keeping
// only nodes with every target label.
func instanceIDs(nodes []providers.Node, labels map[string]string) ([]string, []string) {
	var ids, warnings []string
	for _, n := range nodes {
		if !matchLabels(n.Labels, labels) {
			continue
		}
		id, ok := instanceID(n.ProviderID)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("node %s has providerID %q, not aws:///<zone>/<instance-id>; it is not a backend", n.Name, n.ProviderID))
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), warnings
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// instanceID returns the instance ID of an AWS providerID: aws:///us-east-1a/i-0123 or
// aws://us-east-1a/i-0123 (both forms exist), or a bare i-0123.
func instanceID(providerID string) (string, bool) {
	rest := providerID
	if r, ok := strings.CutPrefix(providerID, "aws://"); ok {
		rest = r
	} else if !strings.HasPrefix(providerID, "i-") {
		return "", false
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.HasPrefix(id, "i-") || len(id) < 3 {
		return "", false
	}
	return id, true
}

func sslPort(spec ServiceOptions, pt providers.Port) bool {
	if spec.SSLCert == "" || pt.Protocol != providers.TCP {
		return false
	}
	if len(spec.SSLPorts) == 0 {
		return true
	}
	for _, s := range spec.SSLPorts {
		if s == "*" || s == pt.Name || s == strconv.Itoa(int(pt.Port)) {
			return true
		}
	}
	return false
}

// healthCheckLimits are the ranges AWS enforces per kind: ConfigureHealthCheck (Classic) takes a
// timeout of 2-60 s that must be less than the interval; an NLB target group a timeout of 2-120 s
// not greater than the interval. Both take intervals of 5-300 s and thresholds of 2-10 (checked
// when the annotations are parsed).
var healthCheckLimits = map[Kind]struct {
	maxTimeout      int32
	timeoutMayEqual bool
	timeoutRelation string
}{
	Classic: {maxTimeout: 60, timeoutRelation: "less than"},
	NLB:     {maxTimeout: 120, timeoutMayEqual: true, timeoutRelation: "at most"},
}

// checkHealthCheck rejects a health check AWS would refuse for kind, with the values that
// apply (the Service's or the defaults), before anything is created.
func checkHealthCheck(kind Kind, interval, timeout int32) error {
	lim := healthCheckLimits[kind]
	timeoutPath := "metadata.annotations[" + annotations.AWSHealthCheckTimeout + "]"
	if timeout > lim.maxTimeout {
		return providers.Invalid(timeoutPath, "a %s health-check timeout must be 2-%d seconds, not %d", kindName(kind), lim.maxTimeout, timeout)
	}
	if timeout > interval || (timeout == interval && !lim.timeoutMayEqual) {
		return providers.Invalid(timeoutPath, "a %s health-check timeout must be %s the interval: timeout %d s, interval %d s (set %s or %s)",
			kindName(kind), lim.timeoutRelation, timeout, interval, annotations.AWSHealthCheckTimeout, annotations.AWSHealthCheckInterval)
	}
	return nil
}

// validateAccessLog: logs turned on need a bucket.
func validateAccessLog(al AccessLogOptions) error {
	if al.Enabled != nil && *al.Enabled && al.Bucket == "" {
		return providers.Invalid("metadata.annotations["+annotations.AWSAccessLogEnabled+"]", "access logs need a bucket: set %s", annotations.AWSAccessLogS3BucketName)
	}
	return nil
}

func notForKind(key, kind string) string {
	return fmt.Sprintf("%s does not apply to load balancers of type %s; it is ignored", key, kind)
}

func setInt32(dst *int32, v *int32) {
	if v != nil {
		*dst = *v
	}
}

func setSeconds(dst *int32, v *time.Duration) {
	if v != nil {
		*dst = int32(*v / time.Second)
	}
}
