//go:build moto

package aws

// The moto-backed tests of this package build only with -tags moto (make test-e2e runs them;
// make test-unit stays fast). A minimal moto harness, to be replaced by e2e/moto:
// one moto_server per test binary on 127.0.0.1 and a free port, reset before every test, and a
// seeded VPC with tagged subnets, instances and a node security group.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/providers"
)

var moto struct {
	once sync.Once
	url  string
	err  error
	cmd  *exec.Cmd
}

func TestMain(m *testing.M) {
	code := m.Run()
	if moto.cmd != nil && moto.cmd.Process != nil {
		_ = moto.cmd.Process.Kill()
		_ = moto.cmd.Wait()
	}
	os.Exit(code)
}

// motoURL starts moto once and resets it; a missing moto fails the test naming the fix.
func motoURL(t *testing.T) string {
	t.Helper()
	moto.once.Do(func() {
		bin, err := prereq.Host().MotoServer()
		if err != nil {
			moto.err = err
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			moto.err = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		moto.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
		// moto writes its recorder file into its working directory: keep it out of the tree.
		moto.cmd.Dir = os.TempDir()
		// It dies with the test binary even when that is killed (a go test timeout) before
		// TestMain can stop it.
		moto.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := moto.cmd.Start(); err != nil {
			moto.err = fmt.Errorf("starting %s: %w", bin, err)
			return
		}
		moto.url = fmt.Sprintf("http://127.0.0.1:%d", port)
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(moto.url + "/moto-api/data.json")
			if err == nil {
				resp.Body.Close()
				return
			}
			if time.Now().After(deadline) {
				moto.err = fmt.Errorf("moto_server did not answer on %s within 30s: %w", moto.url, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if moto.err != nil {
		t.Fatal(moto.err)
	}
	resp, err := http.Post(moto.url+"/moto-api/reset", "", nil)
	if err != nil {
		t.Fatalf("resetting moto: %v", err)
	}
	resp.Body.Close()
	return moto.url
}

// fixture is a seeded moto: a VPC, one public (role/elb) and one private (role/internal-elb)
// subnet per AZ, a node security group tagged for the cluster, and instances.
type fixture struct {
	t       *testing.T
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
	url := motoURL(t)
	ctx := context.Background()
	f := &fixture{t: t, url: url, ec2: ec2.NewFromConfig(awsConfig(url))}
	vpc, err := f.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("198.18.0.0/16")})
	must(t, err)
	f.vpc = aws.ToString(vpc.Vpc.VpcId)
	for i, az := range []string{"us-east-1a", "us-east-1b"} {
		for _, kind := range []string{"public", "private"} {
			role, third := tagRoleELB, 1+i
			if kind == "private" {
				role, third = tagRoleInternalELB, 11+i
			}
			out, err := f.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
				VpcId: vpc.Vpc.VpcId, AvailabilityZone: aws.String(az), CidrBlock: aws.String(fmt.Sprintf("198.18.%d.0/24", third)),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: toEC2Tags(map[string]string{
					role: "1", clusterTag(testCluster): "shared", "Name": kind + "-" + az})}},
			})
			must(t, err)
			if kind == "public" {
				f.public = append(f.public, aws.ToString(out.Subnet.SubnetId))
			} else {
				f.private = append(f.private, aws.ToString(out.Subnet.SubnetId))
			}
		}
	}
	sg, err := f.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: toEC2Tags(map[string]string{clusterTag(testCluster): "owned"})}},
	})
	must(t, err)
	f.nodeSG = aws.ToString(sg.GroupId)
	for range nodes {
		f.addNode()
	}
	f.certARN = importCert(t, url)
	return f
}

func (f *fixture) addNode() providers.Node {
	i := len(f.nodes)
	out, err := f.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String("ami-12c6146b"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(f.private[i%len(f.private)]), SecurityGroupIds: []string{f.nodeSG},
		InstanceType: ec2types.InstanceTypeT3Micro,
	})
	must(f.t, err)
	in := out.Instances[0]
	n := providers.Node{
		Name:       fmt.Sprintf("node-%d", i),
		ProviderID: fmt.Sprintf("aws:///%s/%s", aws.ToString(in.Placement.AvailabilityZone), aws.ToString(in.InstanceId)),
		Labels:     map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%d", i)},
	}
	f.nodes = append(f.nodes, n)
	return n
}

func (f *fixture) provider(defaultType annotations.AWSType) *Provider {
	f.reg = prometheus.NewRegistry()
	p, err := NewWithConfig(awsConfig(f.url), Options{
		ClusterName: testCluster, DefaultType: defaultType, Logger: testr.New(f.t), Metrics: f.reg,
		ExtraTags: map[string]string{"team": "portico"},
	})
	must(f.t, err)
	return p
}

// legacyProvider creates NLBs without security groups, as Portico did before the backend group:
// their per-Service node rules are still maintained.
func (f *fixture) legacyProvider(defaultType annotations.AWSType) *Provider {
	f.reg = prometheus.NewRegistry()
	p, err := NewWithConfig(awsConfig(f.url), Options{
		ClusterName: testCluster, DefaultType: defaultType, Logger: testr.New(f.t), Metrics: f.reg,
		ExtraTags: map[string]string{"team": "portico"}, sgLessNLBs: true,
	})
	must(f.t, err)
	return p
}

// calls returns the provider's own count of AWS operations by name.
func (f *fixture) calls() map[string]float64 {
	mfs, err := f.reg.Gather()
	must(f.t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[label(m, "service")+":"+label(m, "operation")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func importCert(t *testing.T, url string) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lb.example.test"}, DNSNames: []string{"lb.example.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	out, err := acm.NewFromConfig(awsConfig(url)).ImportCertificate(context.Background(), &acm.ImportCertificateInput{
		Certificate: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		PrivateKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	})
	must(t, err)
	return aws.ToString(out.CertificateArn)
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
