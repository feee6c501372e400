// Command portico-controller reconciles Services of type LoadBalancer through Portico's
// providers. main only turns flags into a validated config and runs the manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
)

func main() {
	cfg := config.DefaultController()
	fs := flag.NewFlagSet("portico-controller", flag.ExitOnError)
	cfg.BindFlags(fs)
	logCfg := textlogger.NewConfig()
	logCfg.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Complete(fs); err != nil {
		fail(err)
	}
	if err := cfg.Validate(); err != nil {
		fail(err)
	}
	logger := textlogger.NewLogger(logCfg)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	restCfg, err := cfg.RESTConfig()
	if err != nil {
		fail(err)
	}
	mgr, err := controllers.NewManager(cfg, restCfg, logger, nil)
	if err != nil {
		fail(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "portico-controller: %v\n", err)
	os.Exit(1)
}
