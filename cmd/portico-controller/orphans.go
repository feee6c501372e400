package main

import (
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/providers/registry"
)

// orphans runs `portico-controller orphans [--delete] [the controller's flags]`: the Services
// the configured instance holds but no longer serves (config.Orphans, controllers.Orphans).
func orphans(args []string) {
	cfg := config.DefaultOrphans(registry.NewConfigs())
	cli := config.NewCLI(name + " orphans")
	cfg.BindFlags(cli.Flags())
	config.ExitOnError(name, cli.Parse(args))
	config.ExitOnError(name, cfg.Complete(cli.Flags()))
	config.ExitOnError(name, cfg.Validate())
	restCfg, err := cfg.RESTConfig()
	config.ExitOnError(name, err)
	logger := klog.Background()
	ctrl.SetLogger(logger)
	config.ExitOnError(name, controllers.Orphans(ctrl.SetupSignalHandler(), cfg, restCfg, logger, os.Stdout, nil))
}
