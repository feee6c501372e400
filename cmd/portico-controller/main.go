// Command portico-controller reconciles Services of type LoadBalancer through Portico's
// providers. main only wires the provider registry into the configuration, turns flags into a
// validated config and runs the manager; `portico-controller migrate metallb` converts MetalLB's
// configuration (package migrate/metallb); `portico-controller orphans` lists, and with --delete
// deletes, the load balancers of Services the instance holds but no longer serves
// (controllers.Orphans).
package main

import (
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/providers/registry"
)

const name = "portico-controller"

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "migrate":
			migrate(os.Args[2:])
			return
		case "orphans":
			orphans(os.Args[2:])
			return
		}
	}
	cfg := config.DefaultController(registry.NewConfigs())
	cli := config.NewCLI(name)
	cfg.BindFlags(cli.Flags())
	config.ExitOnError(name, cli.Parse(os.Args[1:]))
	config.ExitOnError(name, cfg.Complete(cli.Flags()))
	config.ExitOnError(name, cfg.Validate())
	logger := klog.Background()
	ctrl.SetLogger(logger)

	restCfg, err := cfg.RESTConfig()
	config.ExitOnError(name, err)
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllers.NewManager(ctx, cfg, restCfg, logger, nil)
	config.ExitOnError(name, err)
	config.ExitOnError(name, mgr.Start(ctx))
}
