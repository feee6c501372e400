//go:build moto

package aws

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/providertest"
)

func TestClassicLifecycleMoto(t *testing.T) {
	f := seed(t, 3)
	p := f.provider(Classic)
	ctx := context.Background()
	c := elb.NewFromConfig(awsConfig(f.url))
	lb := testLB("shop", f.nodes[:2])
	lb.Ports = append(lb.Ports, providers.Port{Name: "https", Protocol: providers.TCP, Port: 443, NodePort: 30443})
	idle := 120 * time.Second
	yes := true
	optsOf(lb).SSLCert = f.certARN
	// Every port TLS, so that each listener's instance protocol equals its protocol: moto
	// ignores InstanceProtocol and copies the protocol (cloud.md section 7); the mixed case is
	// covered by TestClassicListenerDiffRecorded.
	optsOf(lb).BackendProtocol = "ssl"
	optsOf(lb).ProxyProtocol = true
	optsOf(lb).ConnectionIdleTimeout = &idle
	optsOf(lb).CrossZone = &yes
	optsOf(lb).ConnectionDraining = &yes
	drain := 45 * time.Second
	optsOf(lb).ConnectionDrainingTimeout = &drain
	optsOf(lb).SSLNegotiationPolicy = "ELBSecurityPolicy-TLS-1-2-2017-01"
	extra, err := f.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("extra"), Description: aws.String("extra"), VpcId: aws.String(f.vpc)})
	must(t, err)
	optsOf(lb).ExtraSecurityGroups = []string{aws.ToString(extra.GroupId)}
	st := ensure(t, p, lb)
	name := lbName(testCluster, lb.Ref, Classic, schemeInternetFacing)

	var groups []string
	describe := func() (listeners []string, instances []string, hc string, policies map[int32][]string) {
		out, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
		must(t, err)
		d := out.LoadBalancerDescriptions[0]
		groups = d.SecurityGroups
		for _, l := range d.ListenerDescriptions {
			listeners = append(listeners, aws.ToString(l.Listener.Protocol)+":"+itoa(l.Listener.LoadBalancerPort)+"->"+itoa(aws.ToInt32(l.Listener.InstancePort))+" "+aws.ToString(l.Listener.SSLCertificateId)+" "+strings.Join(l.PolicyNames, ","))
		}
		for _, in := range d.Instances {
			instances = append(instances, aws.ToString(in.InstanceId))
		}
		slices.Sort(listeners)
		slices.Sort(instances)
		if d.HealthCheck != nil {
			hc = aws.ToString(d.HealthCheck.Target)
		}
		policies = map[int32][]string{}
		for _, b := range d.BackendServerDescriptions {
			policies[aws.ToInt32(b.InstancePort)] = b.PolicyNames
		}
		return
	}
	id := func(i int) string { s, _ := instanceID(f.nodes[i].ProviderID); return s }
	listeners, instances, hc, policies := describe()
	pol := " k8s-SSLNegotiationPolicy-ELBSecurityPolicy-TLS-1-2-2017-01"
	if want := []string{"SSL:443->30443 " + f.certARN + pol, "SSL:80->30080 " + f.certARN + pol}; !slices.Equal(listeners, want) {
		t.Errorf("listeners = %q, want %q", listeners, want)
	}
	if want := sorted(id(0), id(1)); !slices.Equal(instances, want) {
		t.Errorf("instances = %v, want %v", instances, want)
	}
	if hc != "SSL:30080" {
		t.Errorf("health check = %s, want SSL:30080 (ssl backend)", hc)
	}
	for _, port := range []int32{30080, 30443} {
		if !slices.Equal(policies[port], []string{proxyProtocolPolicy}) {
			t.Errorf("backend %d policies = %v, want PROXY protocol", port, policies[port])
		}
	}
	attrs, err := c.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(name)})
	must(t, err)
	if a := attrs.LoadBalancerAttributes; !a.CrossZoneLoadBalancing.Enabled || aws.ToInt32(a.ConnectionSettings.IdleTimeout) != 120 ||
		!a.ConnectionDraining.Enabled || aws.ToInt32(a.ConnectionDraining.Timeout) != 45 {
		t.Errorf("attributes: cross-zone %v, idle %v, draining %+v", a.CrossZoneLoadBalancing.Enabled, aws.ToInt32(a.ConnectionSettings.IdleTimeout), a.ConnectionDraining)
	}
	backend := f.backendGroup(p)
	if len(groups) != 3 || !slices.Contains(groups, aws.ToString(extra.GroupId)) || !slices.Contains(groups, backend) {
		t.Errorf("security groups %v: want its own, %s and the backend group %s", groups, aws.ToString(extra.GroupId), backend)
	}
	if rules, want := f.nodeRules(), []string{"-1:0-0<-" + backend + " (traffic)"}; !slices.Equal(rules, want) {
		t.Errorf("node rules = %v, want %v: the backend group's rule alone", rules, want)
	}

	// Steady state: no writes.
	before := f.calls()
	ensure(t, p, lb)
	for op, n := range f.calls() {
		if d := n - before[op]; d > 0 && !isRead(op) {
			t.Errorf("steady-state Ensure made %v %s call(s)", d, op)
		}
	}

	// Node and health-check changes, PROXY protocol off.
	lb.Nodes = []providers.Node{f.nodes[2]}
	lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32100
	optsOf(lb).ProxyProtocol = false
	ensure(t, p, lb)
	_, instances, hc, policies = describe()
	if !slices.Equal(instances, []string{id(2)}) || hc != "HTTP:32100/healthz" {
		t.Errorf("after update: instances %v health check %s", instances, hc)
	}
	for port, names := range policies {
		if len(names) != 0 {
			t.Errorf("backend %d keeps policies %v after PROXY protocol was turned off", port, names)
		}
	}
	if got, err := p.Get(ctx, lb.Ref); err != nil || got.Ingress[0].Hostname != st.Ingress[0].Hostname {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if err := p.Delete(ctx, lb.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete, moto still holds, tagged for the cluster: %v", left)
	}
}

// isRead reports whether op ("service:Action") is a Describe call.
func isRead(op string) bool {
	_, action, ok := strings.Cut(op, ":")
	return ok && strings.HasPrefix(action, "Describe")
}

// TestReplacementMoto: a scheme change and a kind change each create the replacement first and
// delete the old load balancer afterwards; status moves to the new hostname.
func TestReplacementMoto(t *testing.T) {
	f := seed(t, 2)
	p := f.provider(NLB)
	ctx := context.Background()
	lb := testLB("swap", f.nodes)
	first := ensure(t, p, lb)

	lb.Internal = true
	second := ensure(t, p, lb)
	if second.Ingress[0].Hostname == first.Ingress[0].Hostname {
		t.Errorf("scheme change kept hostname %s", first.Ingress[0].Hostname)
	}
	all := f.nlbs()
	if len(all) != 1 {
		t.Fatalf("after the scheme change moto holds %d NLBs, want 1", len(all))
	}
	for name, v := range all {
		if v.Scheme != schemeInternal || v.Tags[tagReplaces] != "" {
			t.Errorf("NLB %s: scheme %s, replaces tag %q", name, v.Scheme, v.Tags[tagReplaces])
		}
	}

	optsOf(lb).Kind = Classic
	p.opts.DefaultType = Classic
	third := ensure(t, p, lb)
	if third.Ingress[0].Hostname == second.Ingress[0].Hostname {
		t.Errorf("kind change kept hostname")
	}
	if n := len(f.nlbs()); n != 0 {
		t.Errorf("after the kind change moto still holds %d NLBs", n)
	}
	if names := f.classicNames(); len(names) != 1 {
		t.Errorf("after the kind change moto holds Classic ELBs %v, want 1", names)
	}
	if got, err := p.Get(ctx, lb.Ref); err != nil || got.Ingress[0].Hostname != third.Ingress[0].Hostname {
		t.Errorf("Get = %+v, %v; want %s", got, err, third.Ingress[0].Hostname)
	}
	if err := p.Delete(ctx, lb.Ref); err != nil {
		t.Fatal(err)
	}
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}

// TestConformanceMoto runs the providers conformance suite on NLBs in moto.
func TestConformanceMoto(t *testing.T) {
	f := seed(t, 3)
	providertest.Run(t, func(t *testing.T) providers.Provider {
		return f.provider(NLB)
	}, providertest.Options{
		Nodes:       func(*testing.T) []providers.Node { return f.nodes },
		Hostnames:   true,
		Options:     ServiceOptions{Kind: NLB},
		Concurrency: 10,
		Check: func(t *testing.T, _ providers.Provider, lb *providers.LoadBalancer, st providers.Status) {
			if len(st.Warnings) > 0 {
				t.Errorf("warnings for a plain NLB: %v", st.Warnings)
			}
		},
	})
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after the suite, moto still holds, tagged for the cluster: %v", left)
	}
}

// TestAdoptionMoto: a provider that crashed after creating the NLB and a target group, before
// the listener, is replaced by a fresh one: it finds both by name and tags and creates no
// duplicate.
func TestAdoptionMoto(t *testing.T) {
	f := seed(t, 2)
	lb := testLB("adopt", f.nodes)
	optsOf(lb).Kind = NLB
	first := ensure(t, f.provider(Classic), lb)
	ctx := context.Background()
	c := elbv2.NewFromConfig(awsConfig(f.url))
	name := lbName(testCluster, lb.Ref, NLB, schemeInternetFacing)
	lbs, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	must(t, err)
	ls, err := c.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lbs.LoadBalancers[0].LoadBalancerArn})
	must(t, err)
	for _, l := range ls.Listeners {
		_, err := c.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: l.ListenerArn})
		must(t, err)
	}
	tgsBefore, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	must(t, err)

	second := ensure(t, f.provider(Classic), lb)
	if second.Ingress[0].Hostname != first.Ingress[0].Hostname {
		t.Errorf("hostname changed: %s -> %s", first.Ingress[0].Hostname, second.Ingress[0].Hostname)
	}
	tgsAfter, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	must(t, err)
	if len(f.nlbs()) != 1 || len(tgsAfter.TargetGroups) != len(tgsBefore.TargetGroups) {
		t.Errorf("after adoption: %d NLBs, %d target groups (before %d); want 1 and no new group", len(f.nlbs()), len(tgsAfter.TargetGroups), len(tgsBefore.TargetGroups))
	}
	if got := f.nlbs()[name].Listeners; !slices.Equal(got, []string{"TCP:80->TCP:30080"}) {
		t.Errorf("listeners after adoption: %v", got)
	}
	must(t, f.provider(Classic).Delete(ctx, lb.Ref))
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}
