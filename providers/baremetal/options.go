package baremetal

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// ServiceOptions are the bare-metal settings of one Service (MetalLB-compatible keys, declared
// and documented in package annotations), the provider's own part of the desired load balancer
// (providers.LoadBalancer.Options).
type ServiceOptions struct {
	// AddressPool names the pool to allocate from; "" for any pool that auto-assigns.
	AddressPool string
	// AllowSharedIP is the sharing key: Services with the same key may share a VIP.
	AllowSharedIP string
}

// optionRules are the keys ParseOptions reads, each with its aliases.
var optionRules = []annotations.Rule[ServiceOptions]{
	{Key: annotations.AddressPool, Parse: parseAddressPool},
	{Key: annotations.AllowSharedIP, Parse: parseAllowSharedIP},
}

// ParseServiceOptions reads a Service's bare-metal keys strictly: the typed options and every
// problem, at metadata.annotations[<key>].
func ParseServiceOptions(ann map[string]string) (ServiceOptions, field.ErrorList) {
	return annotations.ParseSection(ann, optionRules)
}

// ParseOptions implements providers.Provider with ParseServiceOptions.
func (p *Provider) ParseOptions(ann map[string]string) (providers.ServiceOptions, field.ErrorList) {
	return ParseServiceOptions(ann)
}

// optionsOf returns lb's bare-metal options: the zero value when none were given.
func optionsOf(lb *providers.LoadBalancer) (ServiceOptions, error) {
	return providers.OptionsOf[ServiceOptions](lb, "baremetal")
}

func parseAddressPool(v string, o *ServiceOptions) []annotations.Problem {
	if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
		return []annotations.Problem{{Bad: v, Detail: "must be a pool name (a DNS-1123 subdomain): " + strings.Join(msgs, "; ")}}
	}
	o.AddressPool = v
	return nil
}

func parseAllowSharedIP(v string, o *ServiceOptions) []annotations.Problem {
	if v == "" {
		return []annotations.Problem{{Bad: v, Detail: "must be a non-empty sharing key; remove the annotation to not share"}}
	}
	o.AllowSharedIP = v
	return nil
}
