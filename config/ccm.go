package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// CCM is the configuration of portico-ccm's cloud provider, read from the file the stock
// cloud-controller-manager passes to the provider (--cloud-config). It has no BindFlags: every
// command-line flag of portico-ccm belongs to the stock command (k8s.io/cloud-provider/app), and
// --cloud-config is the stock way to hand settings to a provider. The cluster name comes from
// the stock --cluster-name flag.
//
// The file is YAML: "provider" names the provider, and a section named after a provider holds
// that provider's settings (the same keys as under "providers.<name>" in portico-controller's
// config file):
//
//	provider: reference          # required; a registered provider
//	reference:
//	  pool: 198.18.128.0/24      # reference provider: CIDR ingress IPs are allocated from
//
// P is the binary's provider registry (see ProviderConfigs).
type CCM[P ProviderConfigs] struct {
	// Provider names the Portico provider that serves every class-less LoadBalancer Service.
	// Required: the process refuses to start without one rather than guess.
	Provider string
	// Providers holds every registered provider's configuration, defaults where the file has no
	// section.
	Providers P
}

// DefaultCCM returns the defaults: no provider (it must be named) and providers, every
// registered provider at its defaults (registry.NewConfigs()).
func DefaultCCM[P ProviderConfigs](providers P) CCM[P] {
	return CCM[P]{Providers: providers}
}

// LoadCCM reads a cloud-config file over DefaultCCM and validates it, reporting every problem
// at once (unknown keys included). r is nil when portico-ccm was started without
// --cloud-config, which is an error: the file names the provider.
func LoadCCM[P ProviderConfigs](r io.Reader, providers P) (CCM[P], error) {
	if r == nil {
		return CCM[P]{}, errors.New("no cloud config: pass --cloud-config with a file naming the provider (e.g. \"provider: reference\")")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return CCM[P]{}, fmt.Errorf("reading cloud config: %w", err)
	}
	c := DefaultCCM(providers)
	root := field.NewPath("cloudConfig")
	var sections map[string]json.RawMessage
	if err := yaml.Unmarshal(b, &sections); err != nil {
		return CCM[P]{}, fmt.Errorf("parsing cloud config: %w", err)
	}
	var errs field.ErrorList
	keys := make([]string, 0, len(sections))
	for k := range sections {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := sections[key]
		switch isProvider := slices.Contains(c.Providers.Names(), key); {
		case key == "provider":
			if err := json.Unmarshal(raw, &c.Provider); err != nil {
				errs = append(errs, field.Invalid(root.Child(key), string(raw), "must be a string"))
			}
		case isProvider:
			section, _ := json.Marshal(map[string]json.RawMessage{key: raw})
			if err := c.Providers.UnmarshalJSON(section); err != nil {
				errs = append(errs, field.Invalid(root.Child(key), string(raw), err.Error()))
			}
		default:
			errs = append(errs, field.Forbidden(root.Child(key), fmt.Sprintf("unknown key (known: provider and the provider sections %v)", c.Providers.Names())))
		}
	}
	errs = append(errs, c.validate(root)...)
	if err := aggregate("invalid cloud config", errs); err != nil {
		return CCM[P]{}, err
	}
	return c, nil
}

// Validate returns every problem with the configuration.
func (c CCM[P]) Validate() error {
	return aggregate("invalid cloud config", c.validate(field.NewPath("cloudConfig")))
}

func (c CCM[P]) validate(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Provider == "":
		errs = append(errs, field.Required(root.Child("provider"), "one of "+fmt.Sprint(c.Providers.Names())))
	case !slices.Contains(c.Providers.Names(), c.Provider):
		errs = append(errs, field.NotSupported(root.Child("provider"), c.Provider, c.Providers.Names()))
	}
	return append(errs, c.Providers.Validate(root, []string{c.Provider})...)
}

// LoadCCMFile is LoadCCM on the file at path ("" when --cloud-config was not given).
func LoadCCMFile[P ProviderConfigs](path string, providers P) (CCM[P], error) {
	if path == "" {
		return LoadCCM(nil, providers)
	}
	f, err := os.Open(path)
	if err != nil {
		return CCM[P]{}, fmt.Errorf("reading cloud config: %w", err)
	}
	defer f.Close()
	return LoadCCM(f, providers)
}
