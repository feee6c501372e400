//go:build moto

package aws

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/portico-lb/portico/providers"
)

// TestSharedMTURuleMoto: two NLBs without security groups (created so by an older Portico) with the same source range need the same ICMP rule in the
// node group, which holds one description. Deleting the Service that owns it hands it over to
// the other instead of revoking it.
func TestSharedMTURuleMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.legacyProvider(NLB)
	ctx := context.Background()
	src := []netip.Prefix{netip.MustParsePrefix("198.18.201.0/24")}
	a, b := testLB("alpha", f.nodes), testLB("beta", f.nodes)
	b.Ports[0].NodePort = 30081
	for _, lb := range []*providers.LoadBalancer{a, b} {
		optsOf(lb).Kind = NLB
		lb.SourceRanges = src
		ensure(t, p, lb)
	}
	mtu := func() string {
		out, err := f.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{f.nodeSG}})
		must(t, err)
		var desc string
		visit(out.SecurityGroups[0].IpPermissions, func(r sgRule, d string) {
			if r.Protocol == "icmp" && r.CIDR == src[0] {
				desc = d
			}
		})
		return desc
	}
	if d := mtu(); ruleOwner(d) != a.Ref.UID {
		t.Fatalf("ICMP rule described %q, want owned by the first Service", d)
	}
	must(t, p.Delete(ctx, a.Ref))
	if d := mtu(); ruleOwner(d) != b.Ref.UID || ruleLB(d) != lbName(testCluster, b.Ref, NLB, schemeInternetFacing) {
		t.Errorf("after deleting the first Service the ICMP rule is described %q, want handed over to the second", d)
	}
	must(t, p.Delete(ctx, b.Ref))
	if d := mtu(); d != "" {
		t.Errorf("after deleting both, the ICMP rule is still there: %q", d)
	}
	if left := f.owned(); len(left) != 0 {
		t.Errorf("after Delete: %v", left)
	}
}

// TestStaleNodeGroupRulesMoto: when the only node in a security group leaves the Service, the
// Service's own rules go from that group (an NLB without security groups). The shared rule
// letting the backend group in (Classic ELB, NLB with groups) stays there while any load
// balancer carries the backend group: other Services' nodes may use the group. After Delete
// neither group holds any of Portico's rules.
func TestStaleNodeGroupRulesMoto(t *testing.T) {
	f := seed(t, 1)
	ctx := context.Background()
	sg, err := f.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("nodes-b"), Description: aws.String("nodes-b"), VpcId: aws.String(f.vpc),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: toEC2Tags(map[string]string{clusterTag(testCluster): "owned"})}},
	})
	must(t, err)
	other := aws.ToString(sg.GroupId)
	run, err := f.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(f.private[0]), SecurityGroupIds: []string{other}, InstanceType: ec2types.InstanceTypeT3Micro,
	})
	must(t, err)
	nodeB := providers.Node{Name: "node-b", ProviderID: "aws:///us-east-1a/" + aws.ToString(run.Instances[0].InstanceId)}
	ours := func(group string) []string {
		out, err := f.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{group}})
		must(t, err)
		var rules []string
		visit(out.SecurityGroups[0].IpPermissions, func(r sgRule, d string) {
			if strings.HasPrefix(d, rulePrefix) {
				rules = append(rules, r.key())
			}
		})
		return rules
	}
	for _, legacy := range []bool{true, false} {
		for _, kind := range []Kind{NLB, Classic} {
			if legacy && kind == Classic {
				continue
			}
			p := f.provider(kind)
			if legacy {
				p = f.legacyProvider(kind)
			}
			lb := testLB(fmt.Sprintf("stale-%s-%v", kind, legacy), []providers.Node{f.nodes[0], nodeB})
			optsOf(lb).Kind = kind
			ensure(t, p, lb)
			if len(ours(f.nodeSG)) == 0 || len(ours(other)) == 0 {
				t.Fatalf("%s: rules in %s %v and %s %v, want some in both", kind, f.nodeSG, ours(f.nodeSG), other, ours(other))
			}
			lb.Nodes = []providers.Node{nodeB}
			ensure(t, p, lb)
			got := ours(f.nodeSG)
			if !legacy {
				backend := f.backendGroup(p)
				got = slices.DeleteFunc(got, func(k string) bool { return k == "-1/0/0/"+backend })
			}
			if len(got) != 0 {
				t.Errorf("%s: the group no node uses keeps rules %v", kind, got)
			}
			if len(ours(other)) == 0 {
				t.Errorf("%s: the remaining node's group lost its rules", kind)
			}
			must(t, p.Delete(ctx, lb.Ref))
			if got := slices.Concat(ours(f.nodeSG), ours(other)); len(got) != 0 {
				t.Errorf("%s: after Delete: %v", kind, got)
			}
		}
	}
}
