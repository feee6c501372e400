package baremetal

import (
	"context"
	"errors"
	"flag"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/providers"
)

// Plugin registers the bare-metal provider (see providers/registry).
var Plugin = providers.Plugin{
	Name:      Name,
	NewConfig: func() providers.Config { return &Config{} },
}

// Config is the bare-metal provider's configuration. Address pools are AddressPool objects in
// the cluster, not configuration; the provider has nothing to configure yet beyond its metrics.
type Config struct {
	// DisableMetrics leaves the pool-usage metrics unregistered (--baremetal-disable-metrics).
	DisableMetrics bool `json:"disableMetrics,omitempty"`
}

// BindFlags registers --baremetal-disable-metrics.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.DisableMetrics, "baremetal-disable-metrics", c.DisableMetrics, "do not export the bare-metal pool-usage metrics")
}

// Validate has nothing to check.
func (c *Config) Validate(*field.Path) field.ErrorList { return nil }

// New builds the provider on env.RESTConfig and registers its metrics on env.Metrics.
func (c *Config) New(_ context.Context, env providers.Env) (providers.Provider, error) {
	if env.RESTConfig == nil {
		return nil, errors.New("the bare-metal provider reads AddressPools and Services and needs a Kubernetes API connection")
	}
	src, err := NewAPISource(env.RESTConfig)
	if err != nil {
		return nil, err
	}
	opts := Options{Source: src}
	if env.ProviderFor != nil {
		opts.Owns = func(class *string) bool { return env.ProviderFor(class) == Name }
	}
	p := New(opts)
	if env.Metrics != nil && !c.DisableMetrics {
		if err := env.Metrics.Register(p.Collector()); err != nil {
			return nil, err
		}
	}
	return p, nil
}
