// Package addresspool owns the rules of an AddressPool (api/v1alpha1) that portico-controller
// and portico-agent both apply, so that the two read a pool the same way:
//
//   - pool.go: Parse and Resolve turn AddressPools into Pools (ranges, the network and broadcast
//     rule, overlaps inside a pool and between pools: the older pool wins), Containing finds the
//     pool of an address, Usage counts what a pool hands out;
//   - bgp.go: ParseBGP turns spec.announce.bgp into BGPSettings (peers, communities, local
//     preference, aggregation lengths), and CheckPeers finds a peer selection that selects
//     nothing.
//
// The bare-metal provider (providers/baremetal) allocates from Pools, the pool status
// controller (controllers/pool) reports their problems and usage, and the agent's announcers
// (nodeproxy/announce) decide which VIPs to answer for and advertise with them.
//
// It is part of Portico's ground floor: pure functions over api/v1alpha1 and apimachinery that
// import no client, controller, provider or agent package, so portico-agent links the pool rules
// without linking the bare-metal provider.
package addresspool
