// Command portico-controller reconciles Services of type LoadBalancer through Portico's
// providers. main only turns flags into a validated config and runs the manager.
package main

import (
	"flag"
	"os"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
)

const name = "portico-controller"

func main() {
	cfg := config.DefaultController()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.BindFlags(fs)
	logCfg := config.AddLogFlags(fs)
	config.ExitOnError(name, config.ParseArgs(fs, os.Args[1:]))
	config.ExitOnError(name, cfg.Complete(fs))
	config.ExitOnError(name, cfg.Validate())
	logger := textlogger.NewLogger(logCfg)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	restCfg, err := cfg.RESTConfig()
	config.ExitOnError(name, err)
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllers.NewManager(ctx, cfg, restCfg, logger, nil)
	config.ExitOnError(name, err)
	config.ExitOnError(name, mgr.Start(ctx))
}
