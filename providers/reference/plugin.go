package reference

import (
	"context"
	"flag"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/providers"
)

// Plugin registers the reference provider (see providers/registry).
var Plugin = providers.Plugin{
	Name:      "reference",
	NewConfig: func() providers.Config { return &Config{Pool: defaultPool.String()} },
}

// Config is the reference provider's configuration: flag --reference-pool, file key "pool".
type Config struct {
	// Pool is the CIDR ingress IPs are allocated from.
	Pool string `json:"pool,omitempty"`
}

// BindFlags registers --reference-pool.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Pool, "reference-pool", c.Pool, "CIDR the reference provider allocates ingress IPs from")
}

// Validate checks that Pool is a CIDR.
func (c *Config) Validate(root *field.Path) field.ErrorList {
	if _, err := netip.ParsePrefix(c.Pool); err != nil {
		return field.ErrorList{field.Invalid(root.Child("pool"), c.Pool, "must be a CIDR such as 198.18.128.0/24")}
	}
	return nil
}

// New builds a reference provider that can express session affinity, mixed protocols and
// requested addresses, as the production binaries configure it.
func (c *Config) New(context.Context, providers.Env) (providers.Provider, error) {
	pool, err := netip.ParsePrefix(c.Pool)
	if err != nil {
		return nil, err
	}
	return New(Options{
		Pool:         pool,
		Capabilities: providers.Capabilities{SessionAffinity: true, MixedProtocols: true, RequestedIPs: true},
	}), nil
}
