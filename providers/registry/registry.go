package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/aws"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/reference"
)

// plugins lists every provider Portico can run. Adding a provider is one line here.
var plugins = []providers.Plugin{
	aws.Plugin,
	baremetal.Plugin,
	reference.Plugin,
}

// Names returns the registered provider names, sorted.
func Names() []string {
	out := make([]string, len(plugins))
	for i, p := range plugins {
		out[i] = p.Name
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a registered provider.
func Known(name string) bool { return slices.Contains(Names(), name) }

// Configs holds one Config per registered provider, keyed by name: what a binary binds flags
// and file keys for. Create it with NewConfigs.
type Configs map[string]providers.Config

// NewConfigs returns every registered provider's configuration with its defaults.
func NewConfigs() Configs {
	c := Configs{}
	for _, p := range plugins {
		c[p.Name] = p.NewConfig()
	}
	return c
}

// Names returns the registered provider names, sorted (config.ProviderConfigs).
func (c Configs) Names() []string { return Names() }

// BindFlags registers every provider's flags on fs.
func (c Configs) BindFlags(fs *flag.FlagSet) {
	for _, name := range c.names() {
		c[name].BindFlags(fs)
	}
}

// UnmarshalJSON decodes {"<provider>": {...}, ...} into the Configs already held, so that keys
// absent from the file keep their current values. An unknown provider or key is an error.
func (c Configs) UnmarshalJSON(b []byte) error {
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(b, &sections); err != nil {
		return err
	}
	for _, name := range sortedKeys(sections) {
		cfg, ok := c[name]
		if !ok {
			return fmt.Errorf("unknown provider %q (known: %v)", name, Names())
		}
		if err := DecodeStrict(sections[name], cfg); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// Validate validates, with paths under root, the configurations of the providers in use and
// of every provider whose configuration differs from its defaults: a value the user set is
// checked even for a provider that ends up unused, since it is a mistake either way. Unused
// providers left at their defaults are not validated; their defaults need not be complete.
func (c Configs) Validate(root *field.Path, inUse []string) field.ErrorList {
	check := slices.Clone(inUse)
	for _, p := range plugins {
		if cfg, ok := c[p.Name]; ok && !reflect.DeepEqual(cfg, p.NewConfig()) {
			check = append(check, p.Name)
		}
	}
	var errs field.ErrorList
	for _, name := range uniqueSorted(check) {
		if cfg, ok := c[name]; ok {
			errs = append(errs, cfg.Validate(root.Child(name))...)
		}
	}
	return errs
}

// Build builds the named providers from validated configurations.
func (c Configs) Build(ctx context.Context, names []string, env providers.Env) (map[string]providers.Provider, error) {
	out := map[string]providers.Provider{}
	for _, name := range uniqueSorted(names) {
		cfg, ok := c[name]
		if !ok {
			return nil, fmt.Errorf("unknown provider %q (known: %v)", name, Names())
		}
		p, err := cfg.New(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("building provider %s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

func (c Configs) names() []string { return sortedKeys(c) }

// DecodeStrict decodes JSON into v, rejecting keys v has no field for.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func uniqueSorted(names []string) []string {
	out := slices.Clone(names)
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	sort.Strings(out)
	return slices.Compact(out)
}
