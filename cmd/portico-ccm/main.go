// Command portico-ccm runs Portico's providers inside the stock Kubernetes
// cloud-controller-manager (k8s.io/cloud-provider/app). Every flag is the stock command's; the
// provider is chosen by the --cloud-config file (see config.CCM), for example:
//
//	portico-ccm --cloud-provider=portico --cloud-config=/etc/portico/cloud.yaml \
//	  --controllers=service --kubeconfig=... --leader-elect=true
//
// Only the service controller is registered (cloud-node, cloud-node-lifecycle and route need
// cloud capabilities Portico does not have), so the stock --controllers default ("*") and
// --controllers=service run the same thing, and naming another controller is a startup error.
// main only registers the adapter, hands the flags to the stock command and runs it.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	"k8s.io/klog/v2"

	"github.com/portico-lb/portico/controllers/ccm"
)

func main() {
	cloudprovider.RegisterCloudProvider(ccm.ProviderName, ccm.Factory)

	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("initializing options: %v", err)
	}
	controllers := map[string]app.ControllerInitFuncConstructor{
		names.ServiceLBController: app.DefaultInitFuncConstructors[names.ServiceLBController],
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, controllers, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	cmd.Use = "portico-ccm"
	os.Exit(cli.Run(cmd))
}

// initCloud builds the provider named by --cloud-provider from --cloud-config. The stock
// command gives it no way to return an error, so a bad configuration ends the process here,
// before any controller starts.
func initCloud(cfg *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	shared := cfg.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("initializing cloud provider: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("--cloud-provider=%q is not a cloud provider portico-ccm serves; use --cloud-provider=%s", shared.Name, ccm.ProviderName)
	}
	return cloud
}
