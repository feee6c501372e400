package netlab

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Limits of the address plan (see doc.go).
const (
	slotCount      = 16
	maxNodes       = 12  // pod /24s 1..12 of the slot's /20
	maxClients     = 99  // LAN octets .101-.199
	maxPodsPerNode = 250 // pod octets .1-.250
)

// LAN host octets. An IPv6 LAN address ends in the same digits, read as hex (.11 -> ::11).
const (
	routerOctet = 1
	nodeOctet0  = 10  // node i is .10+i
	clientOct0  = 100 // client i is .100+i
	rootOctet   = 254
)

// Pod gateways, as Calico sets them up: pods route everything to a link-local next hop that the
// node's end of the pod veth answers for (proxy ARP for IPv4, an owned address for IPv6).
var (
	podGateway4 = netip.MustParseAddr("169.254.1.1")
	podGateway6 = netip.MustParseAddr("fe80::1")
)

// plan is the address plan of one slot. It is pure arithmetic: nothing here touches the system.
type plan struct{ slot int }

// block4 is the slot's whole IPv4 range, 198.19.(16*slot).0/20.
func (p plan) block4() netip.Prefix { return p.prefix4(0, 20) }

// block6 is the slot's whole IPv6 range, fd00:c613:slot::/48 (c613 is 198.19 in hex).
func (p plan) block6() netip.Prefix { return p.prefix6(0, 48) }

// lan4 and lan6 are the node LAN shared by nodes, clients, the router and the root link.
func (p plan) lan4() netip.Prefix { return p.prefix4(0, 24) }
func (p plan) lan6() netip.Prefix { return p.prefix6(0, 64) }

// podCIDR4 and podCIDR6 are the pod ranges of node i (1-based).
func (p plan) podCIDR4(node int) netip.Prefix { return p.prefix4(node, 24) }
func (p plan) podCIDR6(node int) netip.Prefix { return p.prefix6(node, 64) }

// lanAddr4 and lanAddr6 are LAN host addresses.
func (p plan) lanAddr4(octet int) netip.Addr { return p.addr4(0, octet) }
func (p plan) lanAddr6(octet int) netip.Addr { return p.addr6(0, octet) }

// podAddr4 and podAddr6 are the addresses of pod j (1-based) of node i.
func (p plan) podAddr4(node, pod int) netip.Addr { return p.addr4(node, pod) }
func (p plan) podAddr6(node, pod int) netip.Addr { return p.addr6(node, pod) }

// addr4 is 198.19.(16*slot+subnet).host.
func (p plan) addr4(subnet, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 19, byte(16*p.slot + subnet), byte(host)})
}

func (p plan) prefix4(subnet, bits int) netip.Prefix {
	return netip.PrefixFrom(p.addr4(subnet, 0), bits)
}

// addr6 is fd00:c613:slot:subnet::host, with host written in decimal digits read as hex so that
// it matches the IPv4 address (198.19.0.11 <-> fd00:c613:0:0::11).
func (p plan) addr6(subnet, host int) netip.Addr {
	h := decimalAsHex(host)
	return netip.AddrFrom16([16]byte{
		0xfd, 0x00, 0xc6, 0x13,
		0x00, byte(p.slot),
		byte(subnet >> 8), byte(subnet),
		14: byte(h >> 8), 15: byte(h),
	})
}

func (p plan) prefix6(subnet, bits int) netip.Prefix {
	return netip.PrefixFrom(p.addr6(subnet, 0), bits)
}

// decimalAsHex reads the decimal digits of n (0..9999) as a hex number: 11 -> 0x11.
func decimalAsHex(n int) uint16 {
	v, err := strconv.ParseUint(strconv.Itoa(n), 16, 16)
	if err != nil {
		panic(fmt.Sprintf("netlab: host number %d out of range", n))
	}
	return uint16(v)
}
