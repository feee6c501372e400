package ccm

import (
	"context"
	"fmt"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/registry"
)

// NewFromConfig builds the provider a validated cloud config (config.CCM) names, through the
// provider registry, and returns the adapter over it.
func NewFromConfig(ctx context.Context, cfg config.CCM[registry.Configs], env providers.Env) (*Cloud, error) {
	provs, err := cfg.Providers.Build(ctx, []string{cfg.Provider}, env)
	if err != nil {
		return nil, err
	}
	p, ok := provs[cfg.Provider]
	if !ok {
		return nil, fmt.Errorf("provider %q was not built", cfg.Provider)
	}
	return New(Options{Provider: p}), nil
}
