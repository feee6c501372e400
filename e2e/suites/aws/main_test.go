package aws_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

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
	// cloud-provider-aws (the parity and adoption tests' anchor) builds in the background on a
	// cold cache while the other tests run; those tests wait for it (cpaws.Ensure's lock).
	warm, stopWarm := context.WithCancel(context.Background())
	go func() { _, _ = cpaws.Ensure(warm, cpaws.Options{}) }()
	cluster.Main(m, &testCluster, cluster.SuiteOptions{
		Options:   cluster.Options{Controllers: []string{}},
		Alongside: buildBinaries, // building the binaries and starting the control plane both take a while
		After: func() error {
			stopWarm()
			if err := moto.StopShared(); err != nil {
				return fmt.Errorf("stopping moto: %w", err)
			}
			return nil
		},
	})
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
