package config

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// CCM is the configuration of portico-ccm's cloud provider, read from the file the stock
// cloud-controller-manager passes to the provider (--cloud-config). It has no BindFlags: every
// command-line flag of portico-ccm belongs to the stock command (k8s.io/cloud-provider/app), and
// --cloud-config is the stock way to hand settings to a provider.
//
// The file is YAML, read strictly (an unknown key is an error):
//
//	provider: reference          # required; one of KnownProviders
//	pool: 198.18.128.0/24        # reference provider: CIDR ingress IPs are allocated from
type CCM struct {
	// Provider names the Portico provider that serves every class-less LoadBalancer Service.
	// Required: the process refuses to start without one rather than guess.
	Provider string `json:"provider"`
	// Pool is the CIDR the reference provider allocates ingress IPs from.
	Pool string `json:"pool,omitempty"`
}

// DefaultCCM returns the defaults: no provider (it must be named) and the reference pool
// portico-controller also uses.
func DefaultCCM() CCM {
	return CCM{Pool: DefaultController().ReferencePool}
}

// LoadCCM reads a cloud-config file over DefaultCCM and validates it. r is nil when
// portico-ccm was started without --cloud-config, which is an error: the file names the provider.
func LoadCCM(r io.Reader) (CCM, error) {
	if r == nil {
		return CCM{}, errors.New("no cloud config: pass --cloud-config with a file naming the provider (e.g. \"provider: reference\")")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return CCM{}, fmt.Errorf("reading cloud config: %w", err)
	}
	c := DefaultCCM()
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return CCM{}, fmt.Errorf("parsing cloud config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return CCM{}, err
	}
	return c, nil
}

// ReferencePool returns Pool parsed; call it only on a validated CCM.
func (c CCM) ReferencePool() netip.Prefix {
	p, _ := netip.ParsePrefix(c.Pool)
	return p
}

// Validate returns every problem with the configuration.
func (c CCM) Validate() error {
	var errs field.ErrorList
	root := field.NewPath("cloudConfig")
	switch {
	case c.Provider == "":
		errs = append(errs, field.Required(root.Child("provider"), "one of "+strings.Join(KnownProviders, ", ")))
	case !known(c.Provider):
		errs = append(errs, field.NotSupported(root.Child("provider"), c.Provider, KnownProviders))
	}
	// Pool is read only by the reference provider, but a bad value is a mistake whatever the
	// provider, so it is always checked.
	if _, err := netip.ParsePrefix(c.Pool); err != nil {
		errs = append(errs, field.Invalid(root.Child("pool"), c.Pool, "must be a CIDR such as 198.18.128.0/24"))
	}
	return aggregate("invalid cloud config", errs)
}
