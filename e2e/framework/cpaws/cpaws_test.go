package cpaws

import (
	"strings"
	"testing"
)

// TestRender: the cloud config names the VPC, subnet and cluster (no instance metadata needed)
// and overrides every service cloud-provider-aws builds a client for, by SDK service ID, with
// AWS's signing name.
func TestRender(t *testing.T) {
	got := CloudConfig{Zone: "us-east-1a", VPC: "vpc-1", SubnetID: "subnet-1", ClusterID: "c1", Region: "us-east-1", URL: "http://127.0.0.1:5000"}.Render()
	for _, want := range []string{
		"[Global]\nZone = us-east-1a\nVPC = vpc-1\nSubnetID = subnet-1\nKubernetesClusterID = c1\n",
		"Service = EC2\nRegion = us-east-1\nURL = http://127.0.0.1:5000\nSigningRegion = us-east-1\nSigningName = ec2\n",
		"Service = Elastic Load Balancing\n", "Service = Elastic Load Balancing v2\n", "Service = KMS\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("cloud config lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "[ServiceOverride "); n != 4 {
		t.Errorf("%d service overrides, want 4", n)
	}
}
