// Package metallb moves a cluster from MetalLB to Portico's bare-metal provider: it reads
// MetalLB's custom resources (IPAddressPool, L2Advertisement, BGPAdvertisement, BGPPeer,
// Community, BFDProfile; metallb.io v1beta1, and v1beta2 for BGPPeer) from the cluster or from
// YAML files, converts them into Portico AddressPools and BGPPeers, and reports, field by
// field, everything that has no equivalent. It owns:
//
//   - types.go: the parts of MetalLB's resources it reads, decoded strictly (a field it does
//     not know is an error, never silently dropped);
//   - read.go: where they come from: YAML files (-f) or the cluster (a dynamic client);
//   - convert.go: the conversion, pure and table-tested, with its findings;
//   - keep.go: the address check: every Service MetalLB serves is run through the bare-metal
//     allocator (providers/baremetal, the code portico-controller runs) against the converted
//     pools, so the command knows before it writes whether each Service keeps its addresses;
//   - write.go: the write: a server-side dry run of every object first, then server-side apply;
//   - command.go: `portico-controller migrate metallb`: its flags, the report, the exit.
//
// Services need no rewrite: Portico reads MetalLB's Service annotations
// (metallb.io/loadBalancerIPs, metallb.io/address-pool, metallb.io/allow-shared-ip and their
// metallb.universe.tf spellings) as aliases of its own keys (package annotations), and the
// bare-metal provider keeps the addresses a Service's status reports (the status is the record).
package metallb
