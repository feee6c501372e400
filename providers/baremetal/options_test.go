package baremetal

import (
	"testing"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/annotations/annotationstest"
	"github.com/portico-lb/portico/providers/providertest"
)

type (
	wantErr     = annotationstest.WantErr
	optionsCase = annotationstest.Case[ServiceOptions]
)

var optionsCases = []optionsCase{
	// portico-lb.io/address-pool and aliases
	{Name: "address pool", In: map[string]string{annotations.AddressPool: "default"}, Want: func(o *ServiceOptions) { o.AddressPool = "default" }},
	{Name: "address pool annotations.MetalLB alias", In: map[string]string{annotations.MetalLBAddressPool: "pool-a"}, Want: func(o *ServiceOptions) { o.AddressPool = "pool-a" }},
	{Name: "address pool legacy alias", In: map[string]string{annotations.MetalLBLegacyAddressPool: "pool-b"}, Want: func(o *ServiceOptions) { o.AddressPool = "pool-b" }},
	{Name: "address pool key and alias agree", In: map[string]string{annotations.AddressPool: "pool-a", annotations.MetalLBLegacyAddressPool: " pool-a"},
		Want: func(o *ServiceOptions) { o.AddressPool = "pool-a" }},
	{Name: "address pool conflict", In: map[string]string{annotations.AddressPool: "pool-a", annotations.MetalLBAddressPool: "pool-b"},
		Want: func(o *ServiceOptions) { o.AddressPool = "pool-a" },
		Errs: []wantErr{{Key: annotations.MetalLBAddressPool, Bad: "pool-b", Contains: "conflicts with portico-lb.io/address-pool"}}},
	{Name: "address pool bad name", In: map[string]string{annotations.AddressPool: "Pool_1"}, Errs: []wantErr{{Key: annotations.AddressPool, Bad: "Pool_1", Contains: "DNS-1123"}}},
	{Name: "address pool empty", In: map[string]string{annotations.AddressPool: ""}, Errs: []wantErr{{Key: annotations.AddressPool, Bad: "", Contains: "DNS-1123"}}},

	// portico-lb.io/allow-shared-ip and aliases
	{Name: "allow shared ip", In: map[string]string{annotations.AllowSharedIP: "web"}, Want: func(o *ServiceOptions) { o.AllowSharedIP = "web" }},
	{Name: "allow shared ip annotations.MetalLB alias", In: map[string]string{annotations.MetalLBAllowSharedIP: "dns"}, Want: func(o *ServiceOptions) { o.AllowSharedIP = "dns" }},
	{Name: "allow shared ip legacy alias", In: map[string]string{annotations.MetalLBLegacyAllowSharedIP: "dns"}, Want: func(o *ServiceOptions) { o.AllowSharedIP = "dns" }},
	{Name: "allow shared ip conflict", In: map[string]string{annotations.MetalLBAllowSharedIP: "a", annotations.MetalLBLegacyAllowSharedIP: "b"},
		Want: func(o *ServiceOptions) { o.AllowSharedIP = "a" },
		Errs: []wantErr{{Key: annotations.MetalLBLegacyAllowSharedIP, Bad: "b", Contains: "conflicts with metallb.io/allow-shared-ip"}}},
	{Name: "allow shared ip empty", In: map[string]string{annotations.AllowSharedIP: " "}, Errs: []wantErr{{Key: annotations.AllowSharedIP, Bad: "", Contains: "non-empty"}}},
}

var optionsTable = annotationstest.Table[ServiceOptions]{Parse: ParseServiceOptions, Cases: optionsCases}

func TestParseServiceOptions(t *testing.T) { optionsTable.Run(t) }

// TestOptionRulesCoverKeys: the rules read exactly the baremetal keys annotations.Keys declares,
// and each has cases.
func TestOptionRulesCoverKeys(t *testing.T) {
	providertest.CheckOptionRules(t, optionsTable, optionRules, "baremetal")
}
