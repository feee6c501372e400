//go:build moto

package aws

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/providers"
)

func ensure(t *testing.T, p *Provider, lb *providers.LoadBalancer) providers.Status {
	t.Helper()
	st, err := p.Ensure(context.Background(), lb)
	if err != nil {
		t.Fatalf("Ensure(%s): %v", lb.Ref, err)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].Hostname == "" {
		t.Fatalf("Ensure(%s) status %+v: want one hostname", lb.Ref, st)
	}
	return st
}

// nlbView is what moto holds for one NLB, in comparable form.
type nlbView struct {
	Scheme    string
	Listeners []string            // "TCP:80->TCP:30080"
	Targets   map[string][]string // target group port -> instance IDs
	HC        map[string]string   // target group port -> "HTTP:32000/healthz"
	Tags      map[string]string
}

func (f *fixture) nlbs() map[string]nlbView {
	ctx := context.Background()
	c := elbv2.NewFromConfig(awsConfig(f.url))
	lbs, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	must(f.t, err)
	out := map[string]nlbView{}
	for _, lb := range lbs.LoadBalancers {
		v := nlbView{Scheme: string(lb.Scheme), Targets: map[string][]string{}, HC: map[string]string{}}
		tags, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{aws.ToString(lb.LoadBalancerArn)}})
		must(f.t, err)
		v.Tags = map[string]string{}
		for _, tg := range tags.TagDescriptions[0].Tags {
			v.Tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		ls, err := c.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
		must(f.t, err)
		for _, l := range ls.Listeners {
			tgs, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{TargetGroupArns: []string{aws.ToString(l.DefaultActions[0].TargetGroupArn)}})
			must(f.t, err)
			tg := tgs.TargetGroups[0]
			port := itoa(aws.ToInt32(tg.Port))
			v.Listeners = append(v.Listeners, string(l.Protocol)+":"+itoa(aws.ToInt32(l.Port))+"->"+string(tg.Protocol)+":"+port)
			hc := string(tg.HealthCheckProtocol) + ":" + aws.ToString(tg.HealthCheckPort)
			if tg.HealthCheckProtocol != elbv2types.ProtocolEnumTcp {
				hc += aws.ToString(tg.HealthCheckPath)
			}
			v.HC[port] = hc
			th, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
			must(f.t, err)
			var ids []string
			for _, d := range th.TargetHealthDescriptions {
				ids = append(ids, aws.ToString(d.Target.Id))
			}
			sort.Strings(ids)
			v.Targets[port] = ids
		}
		sort.Strings(v.Listeners)
		out[aws.ToString(lb.LoadBalancerName)] = v
	}
	return out
}

// nodeRules returns the node group's rules written by the provider, as "proto:from-to<-cidr (purpose)".
func (f *fixture) nodeRules() []string { return f.groupRules(f.nodeSG) }

// lbRules are the rules of a load balancer's first own security group, as nodeRules.
func (f *fixture) lbRules(lbName string) []string {
	return f.groupRules(f.groupID(securityGroupName(lbName, 0)))
}

func (f *fixture) groupRules(group string) []string {
	out, err := f.ec2.DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{group}})
	must(f.t, err)
	var rules []string
	visit(out.SecurityGroups[0].IpPermissions, func(r sgRule, desc string) {
		if strings.HasPrefix(desc, rulePrefix) {
			src := r.Group
			if src == "" {
				src = r.CIDR.String()
			}
			rules = append(rules, r.Protocol+":"+itoa(r.From)+"-"+itoa(r.To)+"<-"+src+" ("+desc[strings.LastIndex(desc, "/")+1:]+")")
		}
	})
	sort.Strings(rules)
	return rules
}

// owned counts every resource in moto tagged as owned by the test cluster.
func (f *fixture) owned() []string {
	ctx := context.Background()
	var out []string
	c := elbv2.NewFromConfig(awsConfig(f.url))
	lbs, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
	must(f.t, err)
	tgs, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	must(f.t, err)
	var arns []string
	for _, lb := range lbs.LoadBalancers {
		arns = append(arns, aws.ToString(lb.LoadBalancerArn))
	}
	for _, tg := range tgs.TargetGroups {
		arns = append(arns, aws.ToString(tg.TargetGroupArn))
	}
	for chunk := range slices.Chunk(arns, 20) {
		tags, err := c.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: chunk})
		must(f.t, err)
		for _, td := range tags.TagDescriptions {
			for _, tg := range td.Tags {
				if aws.ToString(tg.Key) == clusterTag(testCluster) {
					out = append(out, aws.ToString(td.ResourceArn))
				}
			}
		}
	}
	for _, name := range f.classicNames() {
		out = append(out, "classic/"+name)
	}
	sgs, err := f.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2Filter{{Name: aws.String("tag:" + clusterTag(testCluster)), Values: []string{"owned"}}}})
	must(f.t, err)
	for _, g := range sgs.SecurityGroups {
		if aws.ToString(g.GroupId) != f.nodeSG {
			out = append(out, "sg/"+aws.ToString(g.GroupId))
		}
	}
	for _, r := range f.nodeRules() {
		out = append(out, "rule/"+r)
	}
	return out
}

func TestNLBLifecycleMoto(t *testing.T) {
	f := seed(t, 3)
	p := f.provider(Classic)
	ctx := context.Background()
	lb := testLB("web", f.nodes[:2])
	optsOf(lb).Kind = NLB
	optsOf(lb).SSLCert = f.certARN
	optsOf(lb).SSLPorts = []string{"https"}
	lb.Ports = []providers.Port{
		{Name: "dns-tcp", Protocol: providers.TCP, Port: 53, NodePort: 30053},
		{Name: "dns-udp", Protocol: providers.UDP, Port: 53, NodePort: 30053},
		{Name: "http", Protocol: providers.TCP, Port: 80, NodePort: 30080},
		{Name: "https", Protocol: providers.TCP, Port: 443, NodePort: 30443},
		{Name: "syslog", Protocol: providers.UDP, Port: 514, NodePort: 30514},
	}
	lb.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.200.0/24")}
	st := ensure(t, p, lb)
	id := func(i int) string { s, _ := instanceID(f.nodes[i].ProviderID); return s }

	all := f.nlbs()
	if len(all) != 1 {
		t.Fatalf("moto holds %d NLBs, want 1: %v", len(all), all)
	}
	name := lbName(testCluster, lb.Ref, NLB, schemeInternetFacing)
	v, ok := all[name]
	if !ok {
		t.Fatalf("no NLB named %s: %v", name, all)
	}
	wantListeners := []string{"TCP:80->TCP:30080", "TCP_UDP:53->TCP_UDP:30053", "TLS:443->TCP:30443", "UDP:514->UDP:30514"}
	if !slices.Equal(v.Listeners, wantListeners) {
		t.Errorf("listeners = %v, want %v", v.Listeners, wantListeners)
	}
	if v.Scheme != schemeInternetFacing {
		t.Errorf("scheme = %s", v.Scheme)
	}
	for port, ids := range v.Targets {
		if want := sorted(id(0), id(1)); !slices.Equal(ids, want) {
			t.Errorf("targets of %s = %v, want %v", port, ids, want)
		}
		if v.HC[port] != "TCP:traffic-port" {
			t.Errorf("health check of %s = %s, want TCP:traffic-port", port, v.HC[port])
		}
	}
	for k, want := range map[string]string{clusterTag(testCluster): "owned", tagServiceName: "default/web", tagServiceUID: "uid-web", "team": "portico"} {
		if v.Tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, v.Tags[k], want)
		}
	}
	// The source range on every listener port and protocol in the NLB's own group; the node
	// group lets the backend group in, nothing else.
	want := []string{
		"icmp:3-4<-198.18.200.0/24 (mtu)", "tcp:443-443<-198.18.200.0/24 (client)",
		"tcp:53-53<-198.18.200.0/24 (client)", "tcp:80-80<-198.18.200.0/24 (client)",
		"udp:514-514<-198.18.200.0/24 (client)", "udp:53-53<-198.18.200.0/24 (client)",
	}
	if got := f.lbRules(name); !slices.Equal(got, want) {
		t.Errorf("rules of the NLB's group = %v, want %v", got, want)
	}
	backend := f.backendGroup(p)
	if got, want := f.nodeRules(), []string{"-1:0-0<-" + backend + " (traffic)"}; !slices.Equal(got, want) {
		t.Errorf("node rules = %v, want %v", got, want)
	}

	// Steady state: only Describe calls.
	before := f.calls()
	if st2 := ensure(t, p, lb); st2.Ingress[0].Hostname != st.Ingress[0].Hostname {
		t.Errorf("hostname changed from %s to %s", st.Ingress[0].Hostname, st2.Ingress[0].Hostname)
	}
	after := f.calls()
	var reads int
	for op, n := range after {
		d := n - before[op]
		if d == 0 {
			continue
		}
		if _, action, _ := strings.Cut(op, ":"); !strings.HasPrefix(action, "Describe") {
			t.Errorf("steady-state Ensure made %v %s call(s)", d, op)
		}
		reads += int(d)
	}
	t.Logf("steady-state Ensure with 4 listeners: %d Describe calls", reads)

	// A second NLB with the same source range shares the ICMP rule: its steady state writes nothing either.
	other := testLB("web2", f.nodes[:1])
	optsOf(other).Kind = NLB
	other.SourceRanges = lb.SourceRanges
	ensure(t, p, other)
	before = f.calls()
	ensure(t, p, other)
	for op, n := range f.calls() {
		if d := n - before[op]; d > 0 && !isRead(op) {
			t.Errorf("steady-state Ensure of a second NLB made %v %s call(s)", d, op)
		}
	}
	must(t, p.Delete(ctx, other.Ref))

	// Node change: node 1 out, node 2 in; one register and one deregister per target group.
	lb.Nodes = []providers.Node{f.nodes[0], f.nodes[2]}
	before = f.calls()
	ensure(t, p, lb)
	after = f.calls()
	if got := after["Elastic Load Balancing v2:RegisterTargets"] - before["Elastic Load Balancing v2:RegisterTargets"]; got != 4 {
		t.Errorf("node change made %v RegisterTargets calls, want 4 (one per target group)", got)
	}
	for port, ids := range f.nlbs()[name].Targets {
		if !slices.Equal(ids, sorted(id(0), id(2))) {
			t.Errorf("after node change, targets of %s = %v", port, ids)
		}
	}

	// Local: HTTP /healthz on the health-check node port.
	lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000
	ensure(t, p, lb)
	for port, hc := range f.nlbs()[name].HC {
		if hc != "HTTP:32000/healthz" {
			t.Errorf("Local: health check of %s = %s, want HTTP:32000/healthz", port, hc)
		}
	}
	if got, want := f.nodeRules(), []string{"-1:0-0<-" + backend + " (traffic)"}; !slices.Equal(got, want) {
		t.Errorf("Local: node rules = %v, want %v (the backend group reaches the health-check node port)", got, want)
	}
	lb.LocalTrafficOnly, lb.HealthCheckNodePort = false, 0
	ensure(t, p, lb)
	for port, hc := range f.nlbs()[name].HC {
		if hc != "TCP:traffic-port" {
			t.Errorf("back to Cluster: health check of %s = %s", port, hc)
		}
	}

	// Port removal drops the listener and its target group.
	lb.Ports = lb.Ports[2:3]
	ensure(t, p, lb)
	if got := f.nlbs()[name].Listeners; !slices.Equal(got, []string{"TCP:80->TCP:30080"}) {
		t.Errorf("after port removal, listeners = %v", got)
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
	if _, err := p.Get(ctx, lb.Ref); err == nil {
		t.Errorf("Get after Delete succeeded")
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}
