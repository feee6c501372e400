package annotations

// Bare-metal keys, with MetalLB's spellings as aliases.
const (
	// AddressPool names the VIP pool to allocate from.
	// Values: a pool name (a DNS-1123 subdomain). Default: any pool that auto-assigns.
	// Aliases: MetalLBAddressPool, MetalLBLegacyAddressPool; when several are set they must agree.
	AddressPool = porticoPrefix + "address-pool"
	// MetalLBAddressPool is MetalLB's spelling of AddressPool (alias).
	MetalLBAddressPool = "metallb.io/address-pool"
	// MetalLBLegacyAddressPool is MetalLB's pre-0.14 spelling of AddressPool (alias).
	MetalLBLegacyAddressPool = "metallb.universe.tf/address-pool"

	// AllowSharedIP is a sharing key: Services carrying the same key may share a VIP.
	// Values: any non-empty string. Default: no sharing.
	// Aliases: MetalLBAllowSharedIP, MetalLBLegacyAllowSharedIP; when several are set they must agree.
	AllowSharedIP = porticoPrefix + "allow-shared-ip"
	// MetalLBAllowSharedIP is MetalLB's spelling of AllowSharedIP (alias).
	MetalLBAllowSharedIP = "metallb.io/allow-shared-ip"
	// MetalLBLegacyAllowSharedIP is MetalLB's pre-0.14 spelling of AllowSharedIP (alias).
	MetalLBLegacyAllowSharedIP = "metallb.universe.tf/allow-shared-ip"
)

// bareMetalKeys are the bare-metal provider's keys, read by providers/baremetal into its Options.
var bareMetalKeys = []Key{
	{
		Name:     AddressPool,
		Aliases:  []string{MetalLBAddressPool, MetalLBLegacyAddressPool},
		Provider: providerBareMetal,
		Values:   "a pool name (DNS-1123 subdomain)",
		Default:  "any pool that auto-assigns",
		Doc:      "VIP pool to allocate from. The key and its aliases must agree.",
	},
	{
		Name:     AllowSharedIP,
		Aliases:  []string{MetalLBAllowSharedIP, MetalLBLegacyAllowSharedIP},
		Provider: providerBareMetal,
		Values:   "any non-empty string",
		Default:  "no sharing",
		Doc:      "Sharing key: Services with the same key may share a VIP. The key and its aliases must agree.",
	},
}
