package moto_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"

	"github.com/portico-lb/portico/e2e/framework/moto"
)

func TestMain(m *testing.M) { moto.Main(m) }

const cluster = "c1"

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func tagOf(tags []ec2types.Tag, key string) (string, bool) {
	for _, tg := range tags {
		if aws.ToString(tg.Key) == key {
			return aws.ToString(tg.Value), true
		}
	}
	return "", false
}

// TestSeed checks what Seed creates by reading it back through the SDK: exactly the tagged
// subnets discovery would find, in the VPC's 198.18.0.0/16, instances matching the nodes, the
// certificates issued.
func TestSeed(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 3, Nodes: 4})
	ec := ec2.NewFromConfig(srv.AWSConfig(ctx))

	if len(f.AZs) != 3 || len(f.PublicSubnets) != 3 || len(f.PrivateSubnets) != 3 || len(f.Nodes) != 4 {
		t.Fatalf("fixture: %d AZs, %d public, %d private subnets, %d nodes; want 3, 3, 3, 4",
			len(f.AZs), len(f.PublicSubnets), len(f.PrivateSubnets), len(f.Nodes))
	}
	vpcBlock := netip.MustParsePrefix(moto.VPCCIDR)
	for role, want := range map[string][]moto.Subnet{moto.RoleELBTag: f.PublicSubnets, moto.RoleInternalELBTag: f.PrivateSubnets} {
		out, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag-key"), Values: []string{moto.ClusterTag(cluster)}},
			{Name: aws.String("tag:" + role), Values: []string{"1"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var got, wantIDs []string
		for _, sn := range out.Subnets {
			got = append(got, aws.ToString(sn.SubnetId))
			if aws.ToString(sn.VpcId) != f.VPCID {
				t.Errorf("subnet %s in VPC %s, want %s", aws.ToString(sn.SubnetId), aws.ToString(sn.VpcId), f.VPCID)
			}
			p := netip.MustParsePrefix(aws.ToString(sn.CidrBlock))
			if !vpcBlock.Contains(p.Addr()) {
				t.Errorf("subnet %s has %s, outside %s", aws.ToString(sn.SubnetId), p, vpcBlock)
			}
			if v, _ := tagOf(sn.Tags, moto.ClusterTag(cluster)); v != "shared" {
				t.Errorf("subnet %s cluster tag = %q, want shared", aws.ToString(sn.SubnetId), v)
			}
		}
		azs := map[string]bool{}
		for _, sn := range want {
			wantIDs = append(wantIDs, sn.ID)
			azs[sn.AZ] = true
		}
		sort.Strings(got)
		sort.Strings(wantIDs)
		if !slices.Equal(got, wantIDs) {
			t.Errorf("subnets tagged %s: %v, want %v", role, got, wantIDs)
		}
		if len(azs) != 3 {
			t.Errorf("subnets tagged %s span %d AZs, want 3", role, len(azs))
		}
	}

	// The public subnets route 0.0.0.0/0 to the internet gateway; the private ones do not.
	rts, err := ec.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
		{Name: aws.String("route.gateway-id"), Values: []string{f.InternetGatewayID}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var routed []string
	for _, rt := range rts.RouteTables {
		for _, a := range rt.Associations {
			if a.SubnetId != nil {
				routed = append(routed, *a.SubnetId)
			}
		}
	}
	sort.Strings(routed)
	var public []string
	for _, sn := range f.PublicSubnets {
		public = append(public, sn.ID)
	}
	sort.Strings(public)
	if !slices.Equal(routed, public) {
		t.Errorf("subnets routed to the internet gateway: %v, want the public ones %v", routed, public)
	}

	var ids []string
	for _, n := range f.Nodes {
		ids = append(ids, n.InstanceID)
	}
	insts, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ec2types.Instance{}
	for _, r := range insts.Reservations {
		for _, in := range r.Instances {
			byID[aws.ToString(in.InstanceId)] = in
		}
	}
	for i, n := range f.Nodes {
		in, ok := byID[n.InstanceID]
		if !ok {
			t.Fatalf("instance %s not found", n.InstanceID)
		}
		if want := f.PrivateSubnets[i%3]; n.SubnetID != want.ID || n.AZ != want.AZ {
			t.Errorf("node %d in %s/%s, want round-robin %s/%s", i, n.AZ, n.SubnetID, want.AZ, want.ID)
		}
		if n.ProviderID != "aws:///"+n.AZ+"/"+n.InstanceID {
			t.Errorf("node %d providerID %q", i, n.ProviderID)
		}
		if aws.ToString(in.PrivateIpAddress) != n.PrivateIP || aws.ToString(in.PrivateDnsName) != n.Name {
			t.Errorf("node %d: instance has %s %s, node says %s %s", i, aws.ToString(in.PrivateIpAddress), aws.ToString(in.PrivateDnsName), n.PrivateIP, n.Name)
		}
		if v, _ := tagOf(in.Tags, moto.ClusterTag(cluster)); v != "owned" {
			t.Errorf("node %d instance cluster tag = %q, want owned", i, v)
		}
		if len(in.SecurityGroups) != 1 || aws.ToString(in.SecurityGroups[0].GroupId) != f.NodeSecurityGroupID {
			t.Errorf("node %d security groups %v, want only %s", i, in.SecurityGroups, f.NodeSecurityGroupID)
		}
		subnet := netip.MustParsePrefix(f.PrivateSubnets[i%3].CIDR)
		if ip := netip.MustParseAddr(n.PrivateIP); !subnet.Contains(ip) {
			t.Errorf("node %d IP %s outside its subnet %s", i, ip, subnet)
		}
		kn := f.KubeNode(n, map[string]string{"pool": "a"})
		if kn.Name != n.Name || kn.Spec.ProviderID != n.ProviderID || kn.Status.Addresses[0].Address != n.PrivateIP ||
			kn.Labels["topology.kubernetes.io/zone"] != n.AZ || kn.Labels["pool"] != "a" {
			t.Errorf("KubeNode(%d) = %+v", i, kn)
		}
		if pn := f.ProviderNode(n, nil); pn.Name != n.Name || pn.ProviderID != n.ProviderID ||
			len(pn.Addresses) != 1 || pn.Addresses[0].String() != n.PrivateIP {
			t.Errorf("ProviderNode(%d) = %+v", i, pn)
		}
	}
	sgs, err := ec.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{f.NodeSecurityGroupID}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tagOf(sgs.SecurityGroups[0].Tags, moto.ClusterTag(cluster)); v != "owned" {
		t.Errorf("node security group cluster tag = %q, want owned", v)
	}

	if len(f.Certificates) != 2 {
		t.Fatalf("%d certificates, want 2", len(f.Certificates))
	}
	for _, c := range f.Certificates {
		out, err := acm.NewFromConfig(srv.AWSConfig(ctx)).DescribeCertificate(ctx, &acm.DescribeCertificateInput{CertificateArn: aws.String(c.ARN)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Certificate.Status != "ISSUED" || aws.ToString(out.Certificate.DomainName) != c.Domain {
			t.Errorf("certificate %s: status %s domain %s, want ISSUED %s", c.ARN, out.Certificate.Status, aws.ToString(out.Certificate.DomainName), c.Domain)
		}
	}

	// AddNode continues the round-robin; the new instance exists.
	n := f.AddNode(t)
	if n.AZ != f.AZs[1] || len(f.Nodes) != 5 {
		t.Errorf("added node in %s (%d nodes), want %s (5 nodes)", n.AZ, len(f.Nodes), f.AZs[1])
	}
	if _, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{n.InstanceID}}); err != nil {
		t.Errorf("added instance: %v", err)
	}

	// Seeded resources tagged owned (node security group, instances, certificates) are not
	// in the inventory.
	if inv := srv.Owned(t, cluster); len(inv) != 0 {
		t.Errorf("Owned after Seed:\n%s", inv)
	}
}

// TestReset: a reset wipes what a test created.
func TestReset(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 1, Nodes: 1})
	srv.Reset(t)
	_, err := ec2.NewFromConfig(srv.AWSConfig(ctx)).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{f.VPCID}})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidVpcID.NotFound" {
		t.Fatalf("DescribeVpcs of the seeded VPC after Reset: %v, want InvalidVpcID.NotFound", err)
	}
}

func createNLB(t *testing.T, ctx context.Context, v2 *elbv2.Client, f *moto.Fixture, name, tgName string) (lbARN, tgARN, listenerARN string) {
	t.Helper()
	tags := []elbv2types.Tag{{Key: aws.String(moto.ClusterTag(f.Cluster)), Value: aws.String("owned")}}
	var subnets []string
	for _, sn := range f.PublicSubnets {
		subnets = append(subnets, sn.ID)
	}
	lb, err := v2.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name: aws.String(name), Type: elbv2types.LoadBalancerTypeEnumNetwork, Subnets: subnets, Tags: tags,
	})
	if err != nil {
		t.Fatal(err)
	}
	lbARN = aws.ToString(lb.LoadBalancers[0].LoadBalancerArn)
	tg, err := v2.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
		Name: aws.String(tgName), Protocol: elbv2types.ProtocolEnumTcp, Port: aws.Int32(30080),
		VpcId: aws.String(f.VPCID), TargetType: elbv2types.TargetTypeEnumInstance, Tags: tags,
	})
	if err != nil {
		t.Fatal(err)
	}
	tgARN = aws.ToString(tg.TargetGroups[0].TargetGroupArn)
	l, err := v2.CreateListener(ctx, &elbv2.CreateListenerInput{
		LoadBalancerArn: aws.String(lbARN), Port: aws.Int32(80), Protocol: elbv2types.ProtocolEnumTcp,
		DefaultActions: []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: aws.String(tgARN)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return lbARN, tgARN, aws.ToString(l.Listeners[0].ListenerArn)
}

// TestOwnedAndCalls creates an NLB (load balancer, target group, listener), a Classic ELB, a
// security group and an EIP by SDK, and checks that Owned lists exactly those, that a
// duplicate NLB name shows in Duplicates, that deleting empties the inventory, and that the
// recorder counted exactly the calls made (and none of the harness's own).
func TestOwnedAndCalls(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 2, Nodes: 2})
	other := srv.Seed(t, moto.SeedOptions{Cluster: "c2", AZs: 1, Nodes: 1})
	cfg := srv.AWSConfig(ctx)
	v2, cl, ec := elbv2.NewFromConfig(cfg), elb.NewFromConfig(cfg), ec2.NewFromConfig(cfg)

	srv.Record(t)
	lbARN, tgARN, listenerARN := createNLB(t, ctx, v2, f, "nlb-a", "tg-a")
	createNLB(t, ctx, v2, other, "nlb-other", "tg-other") // another cluster's: not in c1's inventory
	sg, err := ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("k8s-elb-a"), Description: aws.String("test"), VpcId: aws.String(f.VPCID),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
			Tags: []ec2types.Tag{{Key: aws.String(moto.ClusterTag(cluster)), Value: aws.String("owned")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	eip, err := ec.AllocateAddress(ctx, &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeElasticIp,
			Tags: []ec2types.Tag{{Key: aws.String(moto.ClusterTag(cluster)), Value: aws.String("owned")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{
		LoadBalancerName: aws.String("classic-a"),
		Listeners:        []elbtypes.Listener{{LoadBalancerPort: 80, InstancePort: aws.Int32(30080), Protocol: aws.String("TCP")}},
		Subnets:          []string{f.PublicSubnets[0].ID},
		SecurityGroups:   []string{aws.ToString(sg.GroupId)},
		Tags:             []elbtypes.Tag{{Key: aws.String(moto.ClusterTag(cluster)), Value: aws.String("owned")}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{"classic-a"}}); err != nil {
		t.Fatal(err)
	}

	inv := srv.Owned(t, cluster)
	want := map[moto.Kind][]string{
		moto.KindLoadBalancer:  {lbARN},
		moto.KindTargetGroup:   {tgARN},
		moto.KindListener:      {listenerARN},
		moto.KindSecurityGroup: {aws.ToString(sg.GroupId)},
		moto.KindAddress:       {aws.ToString(eip.AllocationId)},
		moto.KindClassicLB:     {"classic-a"},
	}
	checkInventory(t, inv, want)
	if d := inv.Duplicates(); len(d) != 0 {
		t.Errorf("duplicates: %v", d)
	}

	// Exactly the calls made since Record, harness calls (Owned) left out.
	calls := srv.Calls(t)
	wantCalls := moto.Calls{
		{Service: moto.ServiceELBv2, Action: "CreateLoadBalancer"}:  2,
		{Service: moto.ServiceELBv2, Action: "CreateTargetGroup"}:   2,
		{Service: moto.ServiceELBv2, Action: "CreateListener"}:      2,
		{Service: moto.ServiceEC2, Action: "CreateSecurityGroup"}:   1,
		{Service: moto.ServiceEC2, Action: "AllocateAddress"}:       1,
		{Service: moto.ServiceELB, Action: "CreateLoadBalancer"}:    1,
		{Service: moto.ServiceELB, Action: "DescribeLoadBalancers"}: 1,
	}
	if calls.String() != wantCalls.String() {
		t.Errorf("recorded calls:\n got %s\nwant %s", calls, wantCalls)
	}
	if w := calls.Writes(); w.Total() != 9 || w.Count(moto.ServiceELB, "DescribeLoadBalancers") != 0 {
		t.Errorf("writes: %s, want the 9 create calls", w)
	}
	if n := calls.Service(moto.ServiceELBv2).Total(); n != 6 {
		t.Errorf("elbv2 calls: %d, want 6", n)
	}

	// moto accepts a second NLB with the same name; the inventory shows the duplicate.
	dupARN, _, _ := createNLB(t, ctx, v2, f, "nlb-a", "tg-a2")
	if dupARN == lbARN {
		t.Fatalf("moto returned the same ARN for a second CreateLoadBalancer %q (it used to create a second one)", "nlb-a")
	}
	if d := srv.Owned(t, cluster).Duplicates(); len(d) != 1 || !strings.HasPrefix(d[0], "elbv2 nlb-a: ") {
		t.Errorf("duplicates after a second nlb-a: %v, want the load balancer", d)
	}

	// Delete everything; the inventory is empty, the other cluster's NLB is untouched.
	for _, arn := range []string{lbARN, dupARN} {
		if _, err := v2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range srv.Owned(t, cluster).Of(moto.KindTargetGroup) {
		if _, err := v2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: aws.String(r.ID)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String("classic-a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: eip.AllocationId}); err != nil {
		t.Fatal(err)
	}
	if inv := srv.Owned(t, cluster); len(inv) != 0 {
		t.Errorf("Owned after deleting everything:\n%s", inv)
	}
	if inv := srv.Owned(t, "c2"); len(inv.Of(moto.KindLoadBalancer)) != 1 || len(inv.Of(moto.KindListener)) != 1 {
		t.Errorf("the other cluster's inventory:\n%s", inv)
	}
}

func checkInventory(t *testing.T, inv moto.Inventory, want map[moto.Kind][]string) {
	t.Helper()
	n := 0
	for kind, ids := range want {
		var got []string
		for _, r := range inv.Of(kind) {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("Owned %s: %v, want %v", kind, got, ids)
		}
		n += len(ids)
	}
	if len(inv) != n {
		t.Errorf("Owned lists %d resources, want %d:\n%s", len(inv), n, inv)
	}
}

// TestProxyThrottle injects throttling errors through the proxy and checks that the SDK's
// standard retryer recognises them (it retries, backing off) and converges, and that
// MaxAttempts bounds it.
func TestProxyThrottle(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 1, Nodes: 1})
	p := srv.Proxy(t)
	cfg := p.AWSConfig(ctx)
	srv.Record(t)

	// EC2: 3 throttles, 4 attempts allowed: the 4th succeeds.
	p.Inject(moto.Rule{Service: moto.ServiceEC2, Action: "DescribeVpcs", Fault: moto.Throttle, Times: 3})
	ec := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.RetryMaxAttempts = 4 })
	start := time.Now()
	out, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{f.VPCID}})
	if err != nil {
		t.Fatalf("DescribeVpcs through 3 throttles: %v", err)
	}
	t.Logf("DescribeVpcs converged through 3 throttles in %s", time.Since(start).Round(time.Millisecond))
	if len(out.Vpcs) != 1 {
		t.Fatalf("%d VPCs", len(out.Vpcs))
	}
	dv := moto.Call{Service: moto.ServiceEC2, Action: "DescribeVpcs"}
	if got := p.Calls()[dv]; got != 4 {
		t.Errorf("proxy saw %d DescribeVpcs, want 4", got)
	}
	if got := p.Faults()[dv]; got != 3 {
		t.Errorf("proxy faulted %d DescribeVpcs, want 3", got)
	}
	if got := srv.Calls(t)[dv]; got != 1 {
		t.Errorf("moto recorded %d DescribeVpcs, want 1 (the throttled ones never reach it)", got)
	}

	// The default 3 attempts give up on 3 throttles, with the service's throttling code.
	// (Short backoffs from here on: what is checked is the error each protocol gives.)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 50 * time.Millisecond })
	}
	p.Inject(moto.Rule{Service: moto.ServiceEC2, Fault: moto.Throttle, Times: 3})
	_, err = ec2.NewFromConfig(cfg).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "RequestLimitExceeded" {
		t.Fatalf("DescribeVpcs with 3 attempts and 3 throttles: %v, want RequestLimitExceeded", err)
	}
	if !retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
		t.Errorf("the SDK does not classify %v as throttling", err)
	}

	// ELBv2 (query XML, Throttling) and ACM (JSON, ThrottlingException).
	p.Inject(moto.Rule{Service: moto.ServiceELBv2, Fault: moto.Throttle, Times: 2})
	if _, err := elbv2.NewFromConfig(cfg).DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}); err != nil {
		t.Errorf("elbv2 DescribeLoadBalancers through 2 throttles: %v", err)
	}
	p.Inject(moto.Rule{Service: moto.ServiceELB, Fault: moto.Throttle, Times: 3})
	_, err = elb.NewFromConfig(cfg).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "Throttling" {
		t.Errorf("classic DescribeLoadBalancers after 3 throttles: %v, want Throttling", err)
	}
	p.Inject(moto.Rule{Service: moto.ServiceACM, Fault: moto.Throttle, Times: 3})
	_, err = acm.NewFromConfig(cfg).ListCertificates(ctx, &acm.ListCertificatesInput{})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
		t.Errorf("acm ListCertificates after 3 throttles: %v, want ThrottlingException", err)
	}
	if got := p.Faults().Total(); got != 3+3+2+3+3 {
		t.Errorf("faults injected: %s (%d), want 14", p.Faults(), got)
	}
}

// TestProxyDrop drops connections and checks the SDK retries and converges; then faults with
// a seeded probability and checks the run is reproducible.
func TestProxyDrop(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 1, Nodes: 1})
	p := srv.Proxy(t)
	cfg := p.AWSConfig(ctx)

	p.Inject(moto.Rule{Action: "DescribeSubnets", Fault: moto.Drop, Times: 2})
	out, err := ec2.NewFromConfig(cfg).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{f.PublicSubnets[0].ID}})
	if err != nil {
		t.Fatalf("DescribeSubnets through 2 dropped connections: %v", err)
	}
	if len(out.Subnets) != 1 {
		t.Fatalf("%d subnets", len(out.Subnets))
	}
	ds := moto.Call{Service: moto.ServiceEC2, Action: "DescribeSubnets"}
	if c, fl := p.Calls()[ds], p.Faults()[ds]; c != 3 || fl != 2 {
		t.Errorf("proxy saw %d DescribeSubnets and dropped %d, want 3 and 2", c, fl)
	}

	// Probability: the same seed faults the same calls; the SDK with enough attempts and no
	// client-side retry quota converges on every call.
	run := func(seed uint64) []bool {
		p.Clear()
		p.Inject(moto.Rule{Service: moto.ServiceEC2, Fault: moto.Throttle, Probability: 0.3, Seed: seed})
		p.Inject(moto.Rule{Service: moto.ServiceEC2, Fault: moto.Drop, Probability: 0.2, Seed: seed + 1})
		ec := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = 20
				so.MaxBackoff = 50 * time.Millisecond
			})
		})
		before := p.Faults().Total()
		var pattern []bool
		for range 20 {
			if _, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{f.VPCID}}); err != nil {
				t.Fatalf("DescribeVpcs with random faults: %v", err)
			}
			n := p.Faults().Total()
			pattern = append(pattern, n > before)
			before = n
		}
		return pattern
	}
	a, b := run(7), run(7)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 faulted different calls: %v vs %v", a, b)
	}
	if !slices.Contains(a, true) || !slices.Contains(a, false) {
		t.Errorf("p=0.3+0.2 faulted %v of 20 calls: want some and not all", a)
	}
}

// TestProxyOnCall: the hook sees every call in order, before it is forwarded.
func TestProxyOnCall(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	p := srv.Proxy(t)
	var mu sync.Mutex
	var seen []string
	p.OnCall(func(c moto.Call) { mu.Lock(); seen = append(seen, c.String()); mu.Unlock() })
	ec := ec2.NewFromConfig(p.AWSConfig(ctx))
	if _, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("198.18.0.0/24")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, " "); got != "ec2:DescribeVpcs ec2:CreateVpc" {
		t.Errorf("OnCall saw %q", got)
	}
	if w := p.Calls().Writes(); w.String() != "ec2:CreateVpc=1" {
		t.Errorf("writes through the proxy: %s", w)
	}
}

// TestLoadBalancers creates an NLB with a registered target and a Classic ELB with a security
// group by SDK and checks what LoadBalancers, LoadBalancerByDNS, HoldsLoadBalancer and
// SecurityGroups read back, and that their requests are left out of Calls.
func TestLoadBalancers(t *testing.T) {
	srv := moto.Shared(t)
	ctx := ctxFor(t)
	f := srv.Seed(t, moto.SeedOptions{Cluster: cluster, AZs: 1, Nodes: 1})
	cfg := srv.AWSConfig(ctx)
	v2, cl, ec := elbv2.NewFromConfig(cfg), elb.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
	lbARN, tgARN, _ := createNLB(t, ctx, v2, f, "nlb-a", "tg-a")
	if _, err := v2.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(tgARN),
		Targets: []elbv2types.TargetDescription{{Id: aws.String(f.Nodes[0].InstanceID)}}}); err != nil {
		t.Fatal(err)
	}
	sg, err := ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("k8s-elb-a"), Description: aws.String("test"), VpcId: aws.String(f.VPCID),
	})
	if err != nil {
		t.Fatal(err)
	}
	sgID := aws.ToString(sg.GroupId)
	if _, err := ec.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(sgID),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(80), ToPort: aws.Int32(80),
			IpRanges: []ec2types.IpRange{{CidrIp: aws.String("198.19.0.0/16"), Description: aws.String("clients")}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(f.NodeSecurityGroupID),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("-1"),
			UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(sgID), Description: aws.String("from the ELB")}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{
		LoadBalancerName: aws.String("classic-a"),
		Listeners:        []elbtypes.Listener{{LoadBalancerPort: 80, InstancePort: aws.Int32(30080), Protocol: aws.String("TCP"), InstanceProtocol: aws.String("TCP")}},
		Subnets:          []string{f.PublicSubnets[0].ID},
		SecurityGroups:   []string{sgID},
		Tags:             []elbtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String("classic-a"),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(f.Nodes[0].InstanceID)}}}); err != nil {
		t.Fatal(err)
	}

	srv.Record(t)
	lbs, err := srv.LoadBalancers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 2 || lbs[0].Name != "classic-a" || lbs[1].Name != "nlb-a" {
		t.Fatalf("LoadBalancers = %+v, want classic-a and nlb-a", lbs)
	}
	classic, nlb := lbs[0], lbs[1]
	inst := f.Nodes[0].InstanceID
	if classic.Kind != moto.KindClassicLB || classic.DNS == "" || classic.Tags["team"] != "a" ||
		!slices.Equal(classic.Instances, []string{inst}) || len(classic.Listeners) != 1 ||
		fmt.Sprint(classic.Listeners[0]) != fmt.Sprint(moto.Listener{Protocol: "TCP", Port: 80, BackendProtocol: "TCP", BackendPort: 30080}) {
		t.Errorf("classic-a = %+v", classic)
	}
	if len(classic.SecurityGroups) != 1 || classic.SecurityGroups[0].ID != sgID || len(classic.SecurityGroups[0].Rules) != 1 ||
		classic.SecurityGroups[0].Rules[0].String() != "tcp 80 from 198.19.0.0/16 (clients)" {
		t.Errorf("classic-a security groups = %+v", classic.SecurityGroups)
	}
	if nlb.Kind != moto.KindLoadBalancer || nlb.ARN != lbARN || nlb.Type != "network" || nlb.Tags[moto.ClusterTag(cluster)] != "owned" || len(nlb.Listeners) != 1 {
		t.Fatalf("nlb-a = %+v", nlb)
	}
	if l := nlb.Listeners[0]; l.Port != 80 || l.Protocol != "TCP" || l.TargetGroup != "tg-a" || l.BackendPort != 30080 ||
		!slices.Equal(l.Targets, []string{inst}) || !strings.HasPrefix(l.HealthCheck, "TCP:") {
		t.Errorf("nlb-a listener = %+v", l)
	}
	if len(nlb.Attrs) == 0 || len(nlb.Listeners[0].TargetGroupAttrs) == 0 {
		t.Errorf("nlb-a attributes %v, target group attributes %v, want both read", nlb.Attrs, nlb.Listeners[0].TargetGroupAttrs)
	}
	if z := classic.Attrs["cross_zone"]; z != "true" && z != "false" {
		t.Errorf("classic-a attributes %v, want cross_zone", classic.Attrs)
	}
	for _, want := range lbs {
		got, err := srv.LoadBalancerByDNS(ctx, want.DNS)
		if err != nil || got == nil || fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", want) {
			t.Errorf("LoadBalancerByDNS(%s) = %+v, %v, want %+v", want.DNS, got, err, want)
		}
		if held, err := srv.HoldsLoadBalancer(ctx, want.DNS); !held || err != nil {
			t.Errorf("HoldsLoadBalancer(%s) = %v, %v, want true", want.DNS, held, err)
		}
	}
	if got, err := srv.LoadBalancerByDNS(ctx, "nothing.elb.example"); got != nil || err != nil {
		t.Errorf("LoadBalancerByDNS of an unknown name = %+v, %v, want nil", got, err)
	}
	if held, err := srv.HoldsLoadBalancer(ctx, "nothing.elb.example"); held || err != nil {
		t.Errorf("HoldsLoadBalancer of an unknown name = %v, %v, want false", held, err)
	}
	groups, err := srv.SecurityGroups(ctx, f.NodeSecurityGroupID)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || len(groups[0].Rules) != 1 || groups[0].Rules[0].String() != "all traffic from "+sgID+" (from the ELB)" {
		t.Errorf("node security group = %+v", groups)
	}
	if calls := srv.Calls(t); calls.Total() != 0 {
		t.Errorf("reading back counted calls: %s", calls)
	}
}
