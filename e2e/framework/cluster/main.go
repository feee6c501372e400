package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
)

// SuiteOptions shape Main.
type SuiteOptions struct {
	Options        // of the control plane
	CRDDir  string // CRDs to install once it is ready; "": none
	// Alongside runs while the control plane starts (building binaries, say); an error from it
	// fails the suite before any test runs.
	Alongside func() error
	// After runs once the tests are done, before the control plane stops; an error from it fails
	// the suite.
	After func() error
}

// Main is the TestMain of a suite whose tests share one control plane. It starts the control
// plane (and Alongside at the same time), installs the CRDs, sends controller-runtime's and
// klog's logs to stderr, keeps the cluster in *into, runs the tests, then After, stops the
// control plane and exits: with the tests' code, or 1 when anything around them failed.
func Main(m *testing.M, into **Cluster, opts SuiteOptions) {
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(0)))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	alongside := make(chan error, 1)
	go func() {
		if opts.Alongside == nil {
			alongside <- nil
			return
		}
		alongside <- opts.Alongside()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	c, err := Start(ctx, opts.Options)
	if err == nil && opts.CRDDir != "" {
		err = c.InstallCRDs(ctx, opts.CRDDir)
	}
	cancel()
	if err = errors.Join(err, <-alongside); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the suite:", err)
		if c != nil {
			_ = c.Stop()
		}
		os.Exit(1)
	}
	*into = c
	code := m.Run()
	if opts.After != nil {
		if err := opts.After(); err != nil {
			fmt.Fprintln(os.Stderr, "after the tests:", err)
			code = 1
		}
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		code = 1
	}
	os.Exit(code)
}
