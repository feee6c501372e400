package migration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/metallb"
)

var (
	testCluster   *cluster.Cluster
	built         metallb.Built
	controllerBin string
)

// TestMain starts a dual-stack control plane with Portico's CRDs while it builds MetalLB and
// portico-controller; the test installs MetalLB's CRDs from its module.
func TestMain(m *testing.M) {
	cluster.Main(m, &testCluster, cluster.SuiteOptions{
		Options: cluster.Options{ServiceCIDRs: []string{cluster.ServiceCIDR, cluster.ServiceCIDR6}},
		CRDDir:  filepath.Join("..", "..", "..", "deploy", "crds"),
		Alongside: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
			defer cancel()
			var err error
			if built, err = metallb.Ensure(ctx, metallb.Options{Log: logf}); err != nil {
				return err
			}
			controllerBin, err = gobuild.Binary(ctx, "cmd/portico-controller")
			return err
		},
	})
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
