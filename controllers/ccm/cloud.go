package ccm

import (
	cloudprovider "k8s.io/cloud-provider"

	"github.com/portico-lb/portico/providers"
)

// ProviderName is the name the adapter is registered under and reports from ProviderName:
// portico-ccm runs with --cloud-provider=portico.
const ProviderName = "portico"

// Options configure a Cloud.
type Options struct {
	// Provider serves every load balancer. Required.
	Provider providers.Provider
}

// Cloud is a cloudprovider.Interface whose only capability is load balancers, each served by a
// Portico Provider. Create it with New.
type Cloud struct {
	lb *loadBalancer
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New returns a Cloud backed by opts.Provider. It panics on a nil Provider: that is a
// programming error, not a runtime condition.
func New(opts Options) *Cloud {
	if opts.Provider == nil {
		panic("ccm: Options.Provider is nil")
	}
	return &Cloud{lb: &loadBalancer{provider: opts.Provider, caps: opts.Provider.Capabilities()}}
}

// Initialize implements cloudprovider.Interface. The adapter needs no API client: providers
// never talk to the API server, and the stock service controller writes status and Events.
func (c *Cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer implements cloudprovider.Interface; it is the one supported capability.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.lb, true }

// Instances implements cloudprovider.Interface: not supported.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface: not supported.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return nil, false }

// Zones implements cloudprovider.Interface: not supported.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface: not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface: not supported.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID implements cloudprovider.Interface. Portico providers identify what they own by
// each Service's namespace, name and UID, not by a cluster tag, so there is nothing to be
// missing; reporting true keeps the stock --allow-untagged-cloud check quiet.
func (c *Cloud) HasClusterID() bool { return true }
