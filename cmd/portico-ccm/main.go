// Command portico-ccm runs Portico's providers inside the stock Kubernetes
// cloud-controller-manager (k8s.io/cloud-provider/app). Every flag is the stock command's; the
// provider is chosen by the --cloud-config file (see config.CCM), for example:
//
//	portico-ccm --cloud-provider=portico --cloud-config=/etc/portico/cloud.yaml \
//	  --cluster-name=prod --controllers=service --kubeconfig=... --leader-elect=true
//
// Only the service controller is registered (cloud-node, cloud-node-lifecycle and route need
// cloud capabilities Portico does not have), so the stock --controllers default ("*") and
// --controllers=service run the same thing, and naming another controller is a startup error.
// The cloud config is read and validated before the stock command starts, so that a bad file
// is reported at once, without an API server. --version prints Portico's version. main only
// wires the provider registry and the adapter into the stock command and runs it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	"k8s.io/klog/v2"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers/ccm"
	"github.com/portico-lb/portico/internal/version"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/registry"
)

const name = "portico-ccm"

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	config.ExitOnError(name, err)
	controllers := map[string]app.ControllerInitFuncConstructor{
		names.ServiceLBController: app.DefaultInitFuncConstructors[names.ServiceLBController],
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, controllers, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	cmd.Use = name
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// The stock --version prints the Kubernetes library's version; portico-ccm's is Portico's.
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
			fmt.Printf("%s %s\n", name, version.Get())
			return nil
		}
		if len(args) > 0 {
			return fmt.Errorf("unexpected argument %q: %s takes only flags (see --help)", args[0], name)
		}
		if p := opts.KubeCloudShared.CloudProvider.Name; p != ccm.ProviderName {
			return fmt.Errorf("--cloud-provider=%q is not a cloud provider %s serves; use --cloud-provider=%s", p, name, ccm.ProviderName)
		}
		if _, err := config.LoadCCMFile(opts.KubeCloudShared.CloudProvider.CloudConfigFile, registry.NewConfigs()); err != nil {
			return err
		}
		return run(c, args)
	}
	if code := cli.Run(cmd); code != 0 {
		os.Exit(config.ExitStartup)
	}
}

// initCloud builds the provider --cloud-config names. The stock command gives it no way to
// return an error, so a failure ends the process here, before any controller starts.
func initCloud(cfg *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	shared := cfg.ComponentConfig.KubeCloudShared
	ccmCfg, err := config.LoadCCMFile(shared.CloudProvider.CloudConfigFile, registry.NewConfigs())
	config.ExitOnError(name, err)
	cloud, err := ccm.NewFromConfig(context.Background(), ccmCfg, providers.Env{
		ClusterName: shared.ClusterName,
		Logger:      klog.Background().WithName("provider"),
		RESTConfig:  cfg.Kubeconfig,
		Metrics:     legacyregistry.Registerer(),
		// The stock service controller owns class-less Services only.
		ProviderFor: func(class *string) string {
			if class == nil {
				return ccmCfg.Provider
			}
			return ""
		},
	})
	config.ExitOnError(name, err)
	return cloud
}
