package ccm

import (
	"fmt"
	"io"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
)

var _ cloudprovider.Factory = Factory

// Factory is the cloudprovider.Factory portico-ccm registers under ProviderName. The stock
// command calls it with the --cloud-config file (nil without one): it reads the file as a
// config.CCM, builds the provider it names and returns the adapter. A missing file, an unknown
// provider or a bad pool is an error, and the stock command exits at startup.
func Factory(cloudConfig io.Reader) (cloudprovider.Interface, error) {
	cfg, err := config.LoadCCM(cloudConfig)
	if err != nil {
		return nil, err
	}
	p, err := newProvider(cfg)
	if err != nil {
		return nil, err
	}
	return New(Options{Provider: p}), nil
}

// newProvider builds the provider a validated config names.
func newProvider(cfg config.CCM) (providers.Provider, error) {
	switch cfg.Provider {
	case config.ProviderReference:
		// The same capabilities portico-controller gives the reference provider.
		return reference.New(reference.Options{
			Pool: cfg.ReferencePool(),
			Capabilities: providers.Capabilities{
				SessionAffinity: true, MixedProtocols: true, RequestedIPs: true,
			},
		}), nil
	default:
		return nil, fmt.Errorf("unknown provider %q", cfg.Provider)
	}
}
