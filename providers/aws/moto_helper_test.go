//go:build moto

package aws

// The moto-backed tests of this package build only with -tags moto (make test-e2e runs them;
// make test-unit stays fast). They run against e2e/framework/moto: one moto_server per test
// binary (found where `make prereqs` installs it, internal/prereq), reset before every test,
// and seeded with a VPC, tagged subnets, instances, a node security group and certificates.

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/providers"
)

func TestMain(m *testing.M) { moto.Main(m) }

// fixture is a seeded moto (moto.Fixture) in the shape these tests use: a VPC, one public
// (role/elb) and one private (role/internal-elb) subnet per AZ in two AZs, a node security
// group tagged for the cluster, instances as providers.Node named node-0, node-1, ...
type fixture struct {
	t       *testing.T
	srv     *moto.Server
	mf      *moto.Fixture
	url     string
	ec2     *ec2.Client
	vpc     string
	public  []string
	private []string
	nodeSG  string
	nodes   []providers.Node
	certARN string
	reg     *prometheus.Registry
}

func seed(t *testing.T, nodes int) *fixture {
	t.Helper()
	srv := moto.Shared(t)
	mf := srv.Seed(t, moto.SeedOptions{Cluster: testCluster, AZs: 2, Nodes: nodes})
	f := &fixture{t: t, srv: srv, mf: mf, url: srv.URL, ec2: ec2.NewFromConfig(awsConfig(srv.URL)),
		vpc: mf.VPCID, nodeSG: mf.NodeSecurityGroupID, certARN: mf.Certificates[0].ARN}
	for _, sn := range mf.PublicSubnets {
		f.public = append(f.public, sn.ID)
	}
	for _, sn := range mf.PrivateSubnets {
		f.private = append(f.private, sn.ID)
	}
	for _, n := range mf.Nodes {
		f.nodes = append(f.nodes, f.node(n))
	}
	return f
}

// node is n as these tests name it: node-<index>, with only the hostname label.
func (f *fixture) node(n moto.Node) providers.Node {
	name := fmt.Sprintf("node-%d", len(f.nodes))
	return providers.Node{Name: name, ProviderID: n.ProviderID, Labels: map[string]string{"kubernetes.io/hostname": name}}
}

// addNode launches one more instance and returns it as a node.
func (f *fixture) addNode() providers.Node {
	n := f.node(f.mf.AddNode(f.t))
	f.nodes = append(f.nodes, n)
	return n
}

// newRegistry is a fresh registry for the next provider's metrics. At the end of the test,
// every operation that provider made must be granted by deploy/aws/iam-policy.json.
func (f *fixture) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	f.reg = reg
	f.t.Cleanup(func() {
		prev := f.reg
		f.reg = reg
		var ops []string
		for op := range f.calls() {
			ops = append(ops, op)
		}
		f.reg = prev
		if missing := policyCovers(f.t, ops); len(missing) > 0 {
			f.t.Errorf("the provider made calls deploy/aws/iam-policy.json does not grant: %v", missing)
		}
	})
	return reg
}

func (f *fixture) provider(defaultType Kind) *Provider {
	f.reg = f.newRegistry()
	p, err := NewWithConfig(f.iamCheckedConfig(), Options{
		ClusterName: testCluster, DefaultType: defaultType, Logger: testr.New(f.t), Metrics: f.reg,
		ExtraTags: map[string]string{"team": "portico"},
	})
	must(f.t, err)
	return p
}

// legacyProvider creates NLBs without security groups, as Portico did before the backend group:
// their per-Service node rules are still maintained.
func (f *fixture) legacyProvider(defaultType Kind) *Provider {
	f.reg = f.newRegistry()
	p, err := NewWithConfig(f.iamCheckedConfig(), Options{
		ClusterName: testCluster, DefaultType: defaultType, Logger: testr.New(f.t), Metrics: f.reg,
		ExtraTags: map[string]string{"team": "portico"}, sgLessNLBs: true,
	})
	must(f.t, err)
	return p
}

// iamCheckedConfig is the configuration of a provider whose every call is evaluated against
// deploy/aws/iam-policy.json's statements and conditions (iamRecorder); the test fails at its
// end on any call the policy would deny.
func (f *fixture) iamCheckedConfig() aws.Config {
	cfg := awsConfig(f.url)
	rec := newIAMRecorder(f.t, f)
	rec.install(&cfg)
	f.t.Cleanup(func() {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, d := range rec.denied {
			f.t.Errorf("the IAM policy denies: %s", d)
		}
	})
	return cfg
}

// calls returns the provider's own count of AWS operations by name.
func (f *fixture) calls() map[string]float64 {
	mfs, err := f.reg.Gather()
	must(f.t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "portico_aws_api_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "service")+":"+label(m, "operation")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) classicNames() []string {
	out, err := elb.NewFromConfig(awsConfig(f.url)).DescribeLoadBalancers(context.Background(), &elb.DescribeLoadBalancersInput{})
	must(f.t, err)
	var names []string
	for _, d := range out.LoadBalancerDescriptions {
		names = append(names, aws.ToString(d.LoadBalancerName))
	}
	return names
}
