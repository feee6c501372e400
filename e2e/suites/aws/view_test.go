package aws_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/e2e/framework/moto"
)

// awsView reads what moto holds through moto.Server's reader (the harness's User-Agent, left
// out of moto.Calls). elb and elbv2 serve everyLBHas, which counts targets without describing
// every load balancer in full.
type awsView struct {
	srv   *moto.Server
	f     *moto.Fixture
	elb   *elb.Client
	elbv2 *elbv2.Client
}

func newAWSView(srv *moto.Server, f *moto.Fixture) *awsView {
	cfg := srv.HarnessConfig()
	return &awsView{srv: srv, f: f, elb: elb.NewFromConfig(cfg), elbv2: elbv2.NewFromConfig(cfg)}
}

// lbView is one load balancer as moto holds it, keyed the way the tests compare it: Kind is
// kindNLB or kindClassic and Listeners are by "PROTO:port", e.g. "TCP_UDP:53", "TLS:443",
// "SSL:443" (Classic). Both shadow the moto.LoadBalancer fields of the same name.
type lbView struct {
	moto.LoadBalancer
	Kind      string
	Listeners map[string]moto.Listener
}

func newLBView(lb *moto.LoadBalancer) *lbView {
	v := &lbView{LoadBalancer: *lb, Kind: kindNLB, Listeners: map[string]moto.Listener{}}
	if lb.Kind == moto.KindClassicLB {
		v.Kind = kindClassic
	}
	for _, l := range lb.Listeners {
		v.Listeners[fmt.Sprintf("%s:%d", l.Protocol, l.Port)] = l
	}
	return v
}

func (l *lbView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s dns=%s", l.Kind, l.Name, l.Scheme, l.DNS)
	for _, k := range keys(l.Listeners) {
		ls := l.Listeners[k]
		fmt.Fprintf(&b, "\n  listener %s -> %s:%d cert=%q", k, ls.BackendProtocol, ls.BackendPort, ls.Cert)
		if l.Kind == kindNLB {
			fmt.Fprintf(&b, " tg=%s targets=%v hc=%s attrs=%v", ls.TargetGroup, ls.Targets, ls.HealthCheck, ls.TargetGroupAttrs)
		}
	}
	if l.Kind == kindClassic {
		fmt.Fprintf(&b, "\n  instances=%v hc=%s sgs=%v policies=%v", l.Instances, l.HealthCheck, sgIDs(l.SecurityGroups), l.BackendPolicies)
	}
	fmt.Fprintf(&b, "\n  attrs=%v tags=%v", l.Attrs, l.Tags)
	return b.String()
}

func sgIDs(gs []moto.SecurityGroup) []string {
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	return ids
}

// ctx30 bounds one look at moto: 30 s.
func ctx30() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// byDNS returns the load balancer whose DNS name is dns, or nil.
func (v *awsView) byDNS(dns string) (*lbView, error) {
	ctx, cancel := ctx30()
	defer cancel()
	lb, err := v.srv.LoadBalancerByDNS(ctx, dns)
	if err != nil || lb == nil {
		return nil, err
	}
	return newLBView(lb), nil
}

// holds reports whether moto holds a load balancer of either kind whose DNS name is dns.
func (v *awsView) holds(dns string) (bool, error) {
	ctx, cancel := ctx30()
	defer cancel()
	return v.srv.HoldsLoadBalancer(ctx, dns)
}

// sourceCIDRs returns the client CIDRs the load balancer admits: the TCP rules of its security
// groups (a Classic ELB, an NLB created with groups); for an NLB without groups the node
// security group's rules the provider marked as the load balancer's client rules.
func (v *awsView) sourceCIDRs(l *lbView) ([]string, error) {
	set := map[string]bool{}
	if l.Kind == kindClassic || len(l.SecurityGroups) > 0 {
		for _, g := range l.SecurityGroups {
			for _, r := range g.Rules {
				if r.Protocol == "tcp" && r.CIDR != "" {
					set[r.CIDR] = true
				}
			}
		}
	} else {
		node, err := v.nodeRules()
		if err != nil {
			return nil, err
		}
		for _, r := range node {
			if r.CIDR != "" && strings.HasSuffix(r.Description, "/"+l.Name+"/client") {
				set[r.CIDR] = true
			}
		}
	}
	var cidrs []string
	for c := range set {
		cidrs = append(cidrs, c)
	}
	return slices.Sorted(slices.Values(cidrs)), nil
}

// ownedNodeRules lists the node security group's rules the provider wrote (description
// "portico/..."), as "proto:from-to:source desc".
func (v *awsView) ownedNodeRules() []string {
	node, err := v.nodeRules()
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var rules []string
	for _, r := range node {
		if strings.HasPrefix(r.Description, "portico/") {
			rules = append(rules, fmt.Sprintf("%s:%d-%d:%s%s %s", r.Protocol, r.FromPort, r.ToPort, r.CIDR, r.SourceGroup, r.Description))
		}
	}
	return rules
}

// nodeRules reads the ingress rules of the seed's node security group.
func (v *awsView) nodeRules() ([]moto.SGRule, error) {
	ctx, cancel := ctx30()
	defer cancel()
	gs, err := v.srv.SecurityGroups(ctx, v.f.NodeSecurityGroupID)
	if err != nil {
		return nil, err
	}
	return gs[0].Rules, nil
}
