package conformance

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
)

// Binaries are the upstream test programs, built at the cluster's version.
type Binaries struct {
	// E2ETest is k8s.io/kubernetes/test/e2e compiled with go test -c.
	E2ETest string
	// Ginkgo is the ginkgo CLI of the version e2e.test links (it runs e2e.test on parallel
	// nodes and merges their reports).
	Ginkgo string
	// Kubectl is what the specs exec pods with (kubectl exec).
	Kubectl string
	// Agnhost is the test image's program (netexec, serve-hostname, pause, ...).
	Agnhost string
}

// testModule is k8s.io/kubernetes at k8sbin.KubernetesVersion with the test programs, in a
// wrapper module of its own next to the one of the cluster's binaries.
func testModule() k8sbin.Module {
	m := k8sbin.Kubernetes()
	m.Cmds = map[string]string{
		"kubectl": "k8s.io/kubernetes/cmd/kubectl",
		"agnhost": "k8s.io/kubernetes/test/images/agnhost",
		// The ginkgo CLI from the module graph of e2e.test: the same version.
		"ginkgo": "github.com/onsi/ginkgo/v2/ginkgo",
	}
	m.Tests = map[string]string{"e2e.test": "k8s.io/kubernetes/test/e2e"}
	m.Wrapper = "k8s.io_kubernetes-e2e@" + k8sbin.KubernetesVersion
	return m
}

// Build returns the test programs, building the missing ones from the Go module proxy into
// Portico's cache (cold: about 20 minutes on two loaded cores; warm: seconds).
func Build(ctx context.Context, log func(string, ...any)) (Binaries, error) {
	dir, err := k8sbin.EnsureModule(ctx, k8sbin.Options{Log: log}, testModule(), "e2e-"+k8sbin.KubernetesVersion, "build.lock")
	if err != nil {
		return Binaries{}, fmt.Errorf("building the upstream e2e programs: %w", err)
	}
	return Binaries{
		E2ETest: filepath.Join(dir, "e2e.test"),
		Ginkgo:  filepath.Join(dir, "ginkgo"),
		Kubectl: filepath.Join(dir, "kubectl"),
		Agnhost: filepath.Join(dir, "agnhost"),
	}, nil
}
