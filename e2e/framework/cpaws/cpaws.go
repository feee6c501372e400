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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/portico-lb/portico/internal/prereq"
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

// Ensure returns the path of the built aws-cloud-controller-manager, building it when missing.
// Concurrent callers serialise on a lock file in the cache. A cold build downloads about 150
// modules and compiles the cloud-provider stack: several minutes on 2 cores.
func Ensure(ctx context.Context, o Options) (string, error) {
	if o.CacheDir == "" {
		o.CacheDir = prereq.CacheDir()
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	binDir := filepath.Join(o.CacheDir, "bin", "cloud-provider-aws-"+Version)
	bin := filepath.Join(binDir, BinaryName)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("creating cache directory: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(o.CacheDir, "cpaws-build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src := filepath.Join(o.CacheDir, "src", "k8s.io_cloud-provider-aws@"+Version)
	if err := writeWrapper(ctx, src); err != nil {
		return "", fmt.Errorf("preparing the wrapper module of %s: %w", module, err)
	}
	start := time.Now()
	o.Log("building %s %s", BinaryName, Version)
	tmp, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := goCmd(ctx, src, "build", "-trimpath", "-o", tmp+"/", pkg); err != nil {
		return "", fmt.Errorf("building %s: %w", BinaryName, err)
	}
	if err := os.Rename(filepath.Join(tmp, BinaryName), bin); err != nil {
		return "", fmt.Errorf("installing %s: %w", BinaryName, err)
	}
	o.Log("built %s in %s", BinaryName, time.Since(start).Round(time.Second))
	return bin, nil
}

// writeWrapper writes (once) a module requiring the pinned cloud-provider-aws, with cel-go
// replaced by a version the proxy serves.
func writeWrapper(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	gomod := fmt.Sprintf("module portico.invalid/cpaws/k8s-io_cloud-provider-aws-%s\n\ngo 1.26.0\n\nrequire %s %s\n\nreplace %s => %s %s\n",
		strings.ReplaceAll(Version, ".", "-"), module, Version, celGo, celGo, celGoPinned)
	tools := fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport _ %q\n", pkg)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools), 0o644); err != nil {
		return err
	}
	return goCmd(ctx, dir, "mod", "tidy")
}

func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// lock takes an exclusive flock on path, waiting until ctx ends.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening build lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
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
