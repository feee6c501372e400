package moto

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
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	acmtypes "github.com/aws/aws-sdk-go-v2/service/acm/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/providers"
)

// Tag keys of the Kubernetes AWS conventions that Seed writes and Owned reads.
const (
	ClusterTagPrefix   = "kubernetes.io/cluster/" // + cluster id; value "owned" or "shared"
	RoleELBTag         = "kubernetes.io/role/elb"
	RoleInternalELBTag = "kubernetes.io/role/internal-elb"
)

// ClusterTag returns the ownership tag key of cluster: kubernetes.io/cluster/<cluster>.
func ClusterTag(cluster string) string { return ClusterTagPrefix + cluster }

// VPCCIDR is the block of every seeded VPC. Public subnet i (0-based, one per AZ) is
// 198.18.(1+i).0/24 and private subnet i is 198.18.(11+i).0/24. These addresses exist only as
// data inside moto.
const VPCCIDR = "198.18.0.0/16"

// imageID is an AMI that moto 5.2.5 ships in its default image list.
const imageID = "ami-12c6146b"

// SeedOptions shape the environment Seed creates. Zero values take the defaults.
type SeedOptions struct {
	// Cluster is the cluster id in kubernetes.io/cluster/<Cluster>; default "portico-test".
	Cluster string
	// AZs is the number of availability zones, 1 to 3; default 3.
	AZs int
	// Nodes is the number of EC2 instances (one per Kubernetes node), spread round-robin over
	// the AZs' private subnets; default 3.
	Nodes int
	// SubnetTagValue is the value of the cluster tag on the VPC and subnets: "owned" or
	// "shared"; default "shared".
	SubnetTagValue string
}

// Subnet is one seeded subnet.
type Subnet struct {
	ID   string
	AZ   string
	CIDR string
}

// Node is one seeded EC2 instance standing for a Kubernetes node.
type Node struct {
	// Name is the instance's private DNS name (ip-198-18-11-4.ec2.internal), the node name
	// cloud-provider-aws expects.
	Name       string
	InstanceID string
	AZ         string
	SubnetID   string
	PrivateIP  string
	// ProviderID is aws:///<AZ>/<InstanceID>.
	ProviderID string
}

// Certificate is a certificate imported into ACM.
type Certificate struct {
	ARN    string
	Domain string // <cluster>.portico.test, <cluster>-2.portico.test
	PEM    []byte
}

// Fixture is what Seed created. The subnets are listed in AZ order.
type Fixture struct {
	Cluster             string
	Region              string
	VPCID               string
	InternetGatewayID   string
	PublicRouteTableID  string
	AZs                 []string
	PublicSubnets       []Subnet // tagged kubernetes.io/role/elb=1
	PrivateSubnets      []Subnet // tagged kubernetes.io/role/internal-elb=1
	NodeSecurityGroupID string   // tagged kubernetes.io/cluster/<Cluster>=owned
	Nodes               []Node
	// Certificates are two self-signed certificates imported into ACM (status ISSUED), the
	// second for certificate changes.
	Certificates []Certificate

	srv *Server
}

// Seed creates, with the SDK against s, a VPC (VPCCIDR) with an internet gateway, a public
// route table (0.0.0.0/0 to the gateway) associated with the public subnets, one public and one
// private subnet per AZ tagged for the cluster and its role, a node security group tagged
// kubernetes.io/cluster/<cluster>=owned, one instance per node in the private subnets with that
// group, and two certificates imported into ACM. Everything is also tagged
// portico.test/seeded=true. Owned leaves these resources out.
func (s *Server) Seed(t testing.TB, opts SeedOptions) *Fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := s.SeedContext(ctx, opts)
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	return f
}

// SeedContext is Seed outside a test (the demo): it returns what it could not create as an
// error instead of failing a test.
func (s *Server) SeedContext(ctx context.Context, opts SeedOptions) (*Fixture, error) {
	if opts.Cluster == "" {
		opts.Cluster = "portico-test"
	}
	if opts.AZs == 0 {
		opts.AZs = 3
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.SubnetTagValue == "" {
		opts.SubnetTagValue = "shared"
	}
	if opts.AZs < 1 || opts.AZs > 3 {
		return nil, fmt.Errorf("SeedOptions.AZs = %d, want 1 to 3", opts.AZs)
	}
	if opts.SubnetTagValue != "owned" && opts.SubnetTagValue != "shared" {
		return nil, fmt.Errorf("SeedOptions.SubnetTagValue = %q, want owned or shared", opts.SubnetTagValue)
	}
	f := &Fixture{Cluster: opts.Cluster, Region: s.Region, srv: s}
	if err := f.seed(ctx, opts); err != nil {
		return nil, fmt.Errorf("seeding: %w", err)
	}
	return f, nil
}

func tagSpec(rt ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	ts := ec2types.TagSpecification{ResourceType: rt}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ts.Tags = append(ts.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return []ec2types.TagSpecification{ts}
}

func (f *Fixture) tags(name, clusterValue string, extra ...string) map[string]string {
	m := map[string]string{"Name": name, ClusterTag(f.Cluster): clusterValue, "portico.test/seeded": "true"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func (f *Fixture) seed(ctx context.Context, opts SeedOptions) error {
	ec := ec2.NewFromConfig(f.srv.harnessConfig())
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{
		CidrBlock:         aws.String(VPCCIDR),
		TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, f.tags(f.Cluster, opts.SubnetTagValue)),
	})
	if err != nil {
		return fmt.Errorf("creating VPC: %w", err)
	}
	f.VPCID = aws.ToString(vpc.Vpc.VpcId)
	f.srv.markSeeded(f.VPCID)

	azs, err := ec.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return fmt.Errorf("listing availability zones: %w", err)
	}
	var names []string
	for _, az := range azs.AvailabilityZones {
		names = append(names, aws.ToString(az.ZoneName))
	}
	sort.Strings(names)
	if len(names) < opts.AZs {
		return fmt.Errorf("region %s has %d zones, want %d", f.Region, len(names), opts.AZs)
	}
	f.AZs = names[:opts.AZs]

	igw, err := ec.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{
		TagSpecifications: tagSpec(ec2types.ResourceTypeInternetGateway, f.tags(f.Cluster, opts.SubnetTagValue)),
	})
	if err != nil {
		return fmt.Errorf("creating internet gateway: %w", err)
	}
	f.InternetGatewayID = aws.ToString(igw.InternetGateway.InternetGatewayId)
	f.srv.markSeeded(f.InternetGatewayID)
	if _, err := ec.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: &f.InternetGatewayID, VpcId: &f.VPCID}); err != nil {
		return fmt.Errorf("attaching internet gateway: %w", err)
	}
	rt, err := ec.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{
		VpcId:             &f.VPCID,
		TagSpecifications: tagSpec(ec2types.ResourceTypeRouteTable, f.tags(f.Cluster+"-public", opts.SubnetTagValue)),
	})
	if err != nil {
		return fmt.Errorf("creating route table: %w", err)
	}
	f.PublicRouteTableID = aws.ToString(rt.RouteTable.RouteTableId)
	f.srv.markSeeded(f.PublicRouteTableID)
	if _, err := ec.CreateRoute(ctx, &ec2.CreateRouteInput{
		RouteTableId: &f.PublicRouteTableID, DestinationCidrBlock: aws.String("0.0.0.0/0"), GatewayId: &f.InternetGatewayID,
	}); err != nil {
		return fmt.Errorf("creating default route: %w", err)
	}

	for i, az := range f.AZs {
		pub, err := f.createSubnet(ctx, ec, az, fmt.Sprintf("198.18.%d.0/24", 1+i), "public", opts.SubnetTagValue, RoleELBTag)
		if err != nil {
			return err
		}
		if _, err := ec.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: &f.PublicRouteTableID, SubnetId: &pub.ID}); err != nil {
			return fmt.Errorf("associating public route table: %w", err)
		}
		f.PublicSubnets = append(f.PublicSubnets, pub)
		priv, err := f.createSubnet(ctx, ec, az, fmt.Sprintf("198.18.%d.0/24", 11+i), "private", opts.SubnetTagValue, RoleInternalELBTag)
		if err != nil {
			return err
		}
		f.PrivateSubnets = append(f.PrivateSubnets, priv)
	}

	sg, err := ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName:         aws.String(f.Cluster + "-nodes"),
		Description:       aws.String("nodes of " + f.Cluster),
		VpcId:             &f.VPCID,
		TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, f.tags(f.Cluster+"-nodes", "owned")),
	})
	if err != nil {
		return fmt.Errorf("creating node security group: %w", err)
	}
	f.NodeSecurityGroupID = aws.ToString(sg.GroupId)
	f.srv.markSeeded(f.NodeSecurityGroupID)

	for range opts.Nodes {
		if _, err := f.addNode(ctx, ec); err != nil {
			return err
		}
	}
	if err := f.importCertificates(ctx); err != nil {
		return err
	}
	return nil
}

func (f *Fixture) createSubnet(ctx context.Context, ec *ec2.Client, az, cidr, kind, clusterValue, roleTag string) (Subnet, error) {
	out, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{
		VpcId:             &f.VPCID,
		AvailabilityZone:  aws.String(az),
		CidrBlock:         aws.String(cidr),
		TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, f.tags(f.Cluster+"-"+kind+"-"+az, clusterValue, roleTag, "1")),
	})
	if err != nil {
		return Subnet{}, fmt.Errorf("creating %s subnet in %s: %w", kind, az, err)
	}
	sn := Subnet{ID: aws.ToString(out.Subnet.SubnetId), AZ: az, CIDR: cidr}
	f.srv.markSeeded(sn.ID)
	return sn, nil
}

// AddNode launches one more instance, in the next AZ's private subnet (round-robin), and
// appends it to f.Nodes.
func (f *Fixture) AddNode(t testing.TB) Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := f.addNode(ctx, ec2.NewFromConfig(f.srv.harnessConfig()))
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	return n
}

func (f *Fixture) addNode(ctx context.Context, ec *ec2.Client) (Node, error) {
	sn := f.PrivateSubnets[len(f.Nodes)%len(f.PrivateSubnets)]
	out, err := ec.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:           aws.String(imageID),
		InstanceType:      ec2types.InstanceTypeT3Medium,
		MinCount:          aws.Int32(1),
		MaxCount:          aws.Int32(1),
		SubnetId:          &sn.ID,
		SecurityGroupIds:  []string{f.NodeSecurityGroupID},
		TagSpecifications: tagSpec(ec2types.ResourceTypeInstance, f.tags(fmt.Sprintf("%s-node-%d", f.Cluster, len(f.Nodes)+1), "owned")),
	})
	if err != nil {
		return Node{}, fmt.Errorf("launching node instance in %s: %w", sn.AZ, err)
	}
	if len(out.Instances) != 1 {
		return Node{}, fmt.Errorf("RunInstances returned %d instances, want 1", len(out.Instances))
	}
	in := out.Instances[0]
	n := Node{
		Name:       aws.ToString(in.PrivateDnsName),
		InstanceID: aws.ToString(in.InstanceId),
		AZ:         sn.AZ,
		SubnetID:   sn.ID,
		PrivateIP:  aws.ToString(in.PrivateIpAddress),
	}
	if in.Placement != nil && aws.ToString(in.Placement.AvailabilityZone) != sn.AZ {
		return Node{}, fmt.Errorf("instance %s placed in %s, want %s", n.InstanceID, aws.ToString(in.Placement.AvailabilityZone), sn.AZ)
	}
	n.ProviderID = "aws:///" + n.AZ + "/" + n.InstanceID
	f.srv.markSeeded(n.InstanceID)
	f.Nodes = append(f.Nodes, n)
	return n, nil
}

// importCertificates imports two self-signed certificates into ACM.
func (f *Fixture) importCertificates(ctx context.Context) error {
	c := acm.NewFromConfig(f.srv.harnessConfig())
	for _, domain := range []string{f.Cluster + ".portico.test", f.Cluster + "-2.portico.test"} {
		certPEM, keyPEM, err := selfSigned(domain)
		if err != nil {
			return fmt.Errorf("generating certificate: %w", err)
		}
		out, err := c.ImportCertificate(ctx, &acm.ImportCertificateInput{
			Certificate: certPEM,
			PrivateKey:  keyPEM,
			Tags:        []acmtypes.Tag{{Key: aws.String(ClusterTag(f.Cluster)), Value: aws.String("owned")}, {Key: aws.String("portico.test/seeded"), Value: aws.String("true")}},
		})
		if err != nil {
			return fmt.Errorf("importing certificate: %w", err)
		}
		arn := aws.ToString(out.CertificateArn)
		f.srv.markSeeded(arn)
		f.Certificates = append(f.Certificates, Certificate{ARN: arn, Domain: domain, PEM: certPEM})
	}
	return nil
}

// selfSigned returns a PEM certificate and PKCS#8 key (ECDSA P-256) for domain, valid for a day.
func selfSigned(domain string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: domain},
		DNSNames:     []string{domain},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// KubeNode returns a Node object for n: name, spec.providerID, the zone, region, instance
// type and hostname labels (plus extra labels), InternalIP/InternalDNS/Hostname addresses and
// Ready=True. Status is a subresource: after creating the object, write its status with
// UpdateStatus.
func (f *Fixture) KubeNode(n Node, labels map[string]string) *corev1.Node {
	l := map[string]string{
		"kubernetes.io/hostname":           n.Name,
		"topology.kubernetes.io/zone":      n.AZ,
		"topology.kubernetes.io/region":    f.Region,
		"node.kubernetes.io/instance-type": string(ec2types.InstanceTypeT3Medium),
	}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: l},
		Spec:       corev1.NodeSpec{ProviderID: n.ProviderID},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.PrivateIP},
				{Type: corev1.NodeInternalDNS, Address: n.Name},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		},
	}
}

// KubeNodes returns KubeNode for every seeded node, without extra labels.
func (f *Fixture) KubeNodes() []*corev1.Node {
	out := make([]*corev1.Node, len(f.Nodes))
	for i, n := range f.Nodes {
		out[i] = f.KubeNode(n, nil)
	}
	return out
}

// ProviderNode returns n as the provider model's node (name, providerID, InternalIP), with
// the zone label and extra labels.
func (f *Fixture) ProviderNode(n Node, labels map[string]string) providers.Node {
	l := map[string]string{"kubernetes.io/hostname": n.Name, "topology.kubernetes.io/zone": n.AZ}
	for k, v := range labels {
		l[k] = v
	}
	return providers.Node{Name: n.Name, ProviderID: n.ProviderID, Addresses: []netip.Addr{netip.MustParseAddr(n.PrivateIP)}, Labels: l}
}

// ProviderNodes returns ProviderNode for every seeded node, without extra labels.
func (f *Fixture) ProviderNodes() []providers.Node {
	out := make([]providers.Node, len(f.Nodes))
	for i, n := range f.Nodes {
		out[i] = f.ProviderNode(n, nil)
	}
	return out
}
