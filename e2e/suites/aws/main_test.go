package aws_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/moto"
)

// One control plane and one moto server serve every test of the package; tests run one at a
// time, each with its own namespace, class, cluster name (ownership tags) and Nodes, and reset
// moto (moto.Shared).
var (
	testCluster *cluster.Cluster
	// bins holds the portico-controller and portico-ccm binaries built for this run.
	bins = map[string]string{}
)

var trials = flag.Int("aws.trials", 10, "crash trials TestCrashTrials runs (at least 50 for the full run)")

func TestMain(m *testing.M) {
	flag.Parse()
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(0))))
	dir, err := os.MkdirTemp("", "portico-aws-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Building the binaries and starting the control plane both take a while: overlap them.
	built := make(chan error, 1)
	go func() { built <- buildBinaries(dir) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	c, err := cluster.Start(ctx, cluster.Options{Controllers: []string{}})
	cancel()
	berr := <-built
	if err != nil || berr != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err, "building binaries:", berr)
		if c != nil {
			_ = c.Stop()
		}
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	testCluster = c
	code := m.Run()
	if err := moto.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping moto:", err)
		code = 1
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		code = 1
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func buildBinaries(dir string) error {
	for _, name := range []string{"portico-controller", "portico-ccm"} {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin, "github.com/portico-lb/portico/cmd/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
		bins[name] = bin
	}
	return nil
}
