package aws_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/cpaws"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/moto"
)

// One control plane and one moto server serve every test of the package; tests run one at a
// time, each with its own namespace, class, cluster name (ownership tags) and Nodes, and reset
// moto (moto.Shared).
var (
	testCluster *cluster.Cluster
)

var trials = flag.Int("aws.trials", 10, "crash trials TestCrashTrials runs (at least 50 for the full run)")

func TestMain(m *testing.M) {
	flag.Parse()
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(0))))
	// Building the binaries and starting the control plane both take a while: overlap them.
	built := make(chan error, 1)
	go func() { built <- buildBinaries() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	c, err := cluster.Start(ctx, cluster.Options{Controllers: []string{}})
	cancel()
	berr := <-built
	if err != nil || berr != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err, "building binaries:", berr)
		if c != nil {
			_ = c.Stop()
		}
		os.Exit(1)
	}
	testCluster = c
	// cloud-provider-aws (the parity and adoption tests' anchor) builds in the background on a
	// cold cache while the other tests run; those tests wait for it (cpaws.Ensure's lock).
	warm, stopWarm := context.WithCancel(context.Background())
	go func() { _, _ = cpaws.Ensure(warm, cpaws.Options{}) }()
	code := m.Run()
	stopWarm()
	if err := moto.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping moto:", err)
		code = 1
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		code = 1
	}
	os.Exit(code)
}

// buildBinaries builds (or finds in the cache) the binaries the tests start.
func buildBinaries() error {
	for _, name := range []string{"portico-controller", "portico-ccm"} {
		if _, err := gobuild.Binary(context.Background(), "cmd/"+name); err != nil {
			return err
		}
	}
	return nil
}
