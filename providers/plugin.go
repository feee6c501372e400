package providers

import (
	"context"
	"flag"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
)

// Plugin is how a provider joins Portico. Each provider package exports one Plugin value and
// providers/registry lists it; nothing else in the tree names a provider.
type Plugin struct {
	// Name is what users write after CLASS= in --class, in --classless-provider and in
	// portico-ccm's cloud config ("aws", "baremetal", "reference").
	Name string
	// NewConfig returns the provider's configuration holding its defaults.
	NewConfig func() Config
}

// Config is one provider's own configuration. The provider owns all of it:
//
//   - its defaults (set by Plugin.NewConfig);
//   - its command-line flags, each prefixed with the provider's name ("--aws-region");
//   - its keys in a config file: the value is decoded from JSON (YAML converted to JSON) into
//     the Config under the provider's name ("providers: {aws: {...}}" for portico-controller,
//     "aws: {...}" in portico-ccm's cloud config), strictly: an unknown key is an error;
//   - its validation, which returns every problem, with paths under the given root;
//   - building the provider.
//
// A binary validates and builds only the providers its configuration uses.
type Config interface {
	BindFlags(fs *flag.FlagSet)
	Validate(root *field.Path) field.ErrorList
	// New builds the provider from a validated configuration. It may contact the
	// infrastructure (e.g. to check credentials); ctx bounds that.
	New(ctx context.Context, env Env) (Provider, error)
}

// Env is what the binary hands every provider it builds, beyond the provider's own Config.
type Env struct {
	// ClusterName identifies the cluster in what providers create (AWS ownership tags).
	ClusterName string
	// Logger for the provider's own messages.
	Logger logr.Logger
	// RESTConfig reaches the Kubernetes API server, for providers that read cluster objects
	// (bare-metal address pools). Providers never write Services. Nil in unit tests.
	RESTConfig *rest.Config
	// Metrics is where the provider registers its collectors; nil means it registers none.
	Metrics prometheus.Registerer
	// ProviderFor names the provider this binary hands Services of a loadBalancerClass to (nil:
	// class-less Services), "" when it does not own them. Providers that rebuild state from the
	// cluster's Services (bare metal) use it to recognise their own. Nil when unknown.
	ProviderFor func(class *string) string
}
