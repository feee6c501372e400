package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/providers/registry"
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
type CCM struct {
	// Provider names the Portico provider that serves every class-less LoadBalancer Service.
	// Required: the process refuses to start without one rather than guess.
	Provider string
	// Providers holds every registered provider's configuration, defaults where the file has no
	// section.
	Providers registry.Configs
}

// DefaultCCM returns the defaults: no provider (it must be named) and every provider's defaults.
func DefaultCCM() CCM {
	return CCM{Providers: registry.NewConfigs()}
}

// LoadCCM reads a cloud-config file over DefaultCCM and validates it, reporting every problem
// at once (unknown keys included). r is nil when portico-ccm was started without
// --cloud-config, which is an error: the file names the provider.
func LoadCCM(r io.Reader) (CCM, error) {
	if r == nil {
		return CCM{}, errors.New("no cloud config: pass --cloud-config with a file naming the provider (e.g. \"provider: reference\")")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return CCM{}, fmt.Errorf("reading cloud config: %w", err)
	}
	c := DefaultCCM()
	root := field.NewPath("cloudConfig")
	var sections map[string]json.RawMessage
	if err := yaml.Unmarshal(b, &sections); err != nil {
		return CCM{}, fmt.Errorf("parsing cloud config: %w", err)
	}
	var errs field.ErrorList
	keys := make([]string, 0, len(sections))
	for k := range sections {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := sections[key]
		switch cfg, isProvider := c.Providers[key]; {
		case key == "provider":
			if err := json.Unmarshal(raw, &c.Provider); err != nil {
				errs = append(errs, field.Invalid(root.Child(key), string(raw), "must be a string"))
			}
		case isProvider:
			if err := registry.DecodeStrict(raw, cfg); err != nil {
				errs = append(errs, field.Invalid(root.Child(key), string(raw), err.Error()))
			}
		default:
			errs = append(errs, field.Forbidden(root.Child(key), fmt.Sprintf("unknown key (known: provider and the provider sections %v)", registry.Names())))
		}
	}
	errs = append(errs, c.validate(root)...)
	if err := aggregate("invalid cloud config", errs); err != nil {
		return CCM{}, err
	}
	return c, nil
}

// Validate returns every problem with the configuration.
func (c CCM) Validate() error {
	return aggregate("invalid cloud config", c.validate(field.NewPath("cloudConfig")))
}

func (c CCM) validate(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Provider == "":
		errs = append(errs, field.Required(root.Child("provider"), "one of "+fmt.Sprint(registry.Names())))
	case !registry.Known(c.Provider):
		errs = append(errs, field.NotSupported(root.Child("provider"), c.Provider, registry.Names()))
	}
	return append(errs, c.Providers.Validate(root, []string{c.Provider})...)
}

// LoadCCMFile is LoadCCM on the file at path ("" when --cloud-config was not given).
func LoadCCMFile(path string) (CCM, error) {
	if path == "" {
		return LoadCCM(nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return CCM{}, fmt.Errorf("reading cloud config: %w", err)
	}
	defer f.Close()
	return LoadCCM(f)
}
