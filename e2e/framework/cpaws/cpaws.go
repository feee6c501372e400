// Package cpaws builds cloud-provider-aws's cloud-controller-manager (k8s.io/cloud-provider-aws,
// pinned) from the Go module proxy into Portico's cache, once, and writes the cloud config that
// points it at moto. The AWS suite runs it beside Portico on the same Services as the anchor
// Portico's behaviour is measured against.
//
// The module cannot be `go install`ed: its go.mod replaces github.com/google/cel-go with
// github.com/cel-expr/cel-go v0.31.0, which the module proxy does not serve (403). Ensure builds
// it inside a wrapper module that replaces cel-go with the version the pinned Kubernetes
// libraries build with (v0.26.0, as k8s.io/kubernetes v1.36.3 requires).
package cpaws

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
)

// Pinned version and the cel-go the wrapper module uses instead of the unavailable fork.
const (
	Version     = "v1.36.2"
	module      = "k8s.io/cloud-provider-aws"
	pkg         = module + "/cmd/aws-cloud-controller-manager"
	BinaryName  = "aws-cloud-controller-manager"
	celGo       = "github.com/google/cel-go"
	celGoPinned = "v0.26.0"
)

// Options tune Ensure.
type Options struct {
	// CacheDir is where the wrapper module and the binary live; empty means prereq.CacheDir().
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Ensure returns the path of the built aws-cloud-controller-manager, building it with
// k8sbin.EnsureModule when missing (binary in <cache>/bin/cloud-provider-aws-<Version>, wrapper
// module in <cache>/src/k8s.io_cloud-provider-aws@<Version>). Concurrent callers serialise on
// the lock file cpaws-build.lock in the cache, apart from the Kubernetes builds' lock, so a
// cold build here does not hold up a cluster's start. A cold build downloads about 150 modules
// and compiles the cloud-provider stack: several minutes on 2 cores.
func Ensure(ctx context.Context, o Options) (string, error) {
	m := k8sbin.Module{
		Path:    module,
		Version: Version,
		Pins:    map[string]string{celGo: celGoPinned},
		Cmds:    map[string]string{BinaryName: pkg},
	}
	dir, err := k8sbin.EnsureModule(ctx, k8sbin.Options{CacheDir: o.CacheDir, Log: o.Log}, m, "cloud-provider-aws-"+Version, "cpaws-build.lock")
	if err != nil {
		return "", fmt.Errorf("ensuring %s %s: %w", BinaryName, Version, err)
	}
	return filepath.Join(dir, BinaryName), nil
}

// CloudConfig is the part of cloud-provider-aws's cloud config (gcfg) the suite sets: the
// VPC, subnet and cluster ID (so that it needs no instance metadata), and every service's
// endpoint pointed at URL (moto) through ServiceOverride.
type CloudConfig struct {
	Zone      string // an AZ of the region, e.g. us-east-1a
	VPC       string
	SubnetID  string
	ClusterID string
	Region    string
	URL       string
}

// Render returns the cloud config file's text.
func (c CloudConfig) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[Global]\nZone = %s\nVPC = %s\nSubnetID = %s\nKubernetesClusterID = %s\n", c.Zone, c.VPC, c.SubnetID, c.ClusterID)
	// Service is the SDK's service ID; the signing name is AWS's.
	for i, svc := range [][2]string{{"EC2", "ec2"}, {"Elastic Load Balancing", "elasticloadbalancing"},
		{"Elastic Load Balancing v2", "elasticloadbalancing"}, {"KMS", "kms"}} {
		fmt.Fprintf(&b, "\n[ServiceOverride %q]\nService = %s\nRegion = %s\nURL = %s\nSigningRegion = %s\nSigningName = %s\n",
			fmt.Sprint(i+1), svc[0], c.Region, c.URL, c.Region, svc[1])
	}
	return b.String()
}
