// Package baremetal is the bare-metal provider: it hands out load-balancer addresses (VIPs)
// from the AddressPools cluster admins declare (api/v1alpha1) and reports them with ipMode VIP;
// portico-agent announces and serves them. It does no node I/O.
//
// The package owns three things:
//
//   - pool.go: parsing and validating pools (ranges, overlaps between pools, the network and
//     broadcast rule), shared with the pool status controller (controllers/pool);
//   - alloc.go: the allocator, pure and table-tested: which address a Service gets, sharing,
//     dual stack, stickiness;
//   - provider.go: the providers.Provider around it, reading pools, Services and namespaces
//     from the API server (never writing), with every allocation under one mutex.
//
// # Stickiness and duplicates
//
// The Service's status.loadBalancer.ingress is the record of what it holds: there is no other
// allocation store. Before its first allocation the provider lists every Service it owns and
// takes the addresses their status reports (oldest Service first), so a restarted or newly
// elected controller hands out nothing that is already held. An address, once held, is kept
// for as long as the Service exists, unless the Service itself asks for something it excludes:
// a different requested address, a different pool (portico-lb.io/address-pool), a different
// internal setting, or sharing rules it no longer meets. The released address goes back to its
// pool at once. Editing or deleting a pool never takes an address away from a Service.
//
// Within one process every decision is made under one mutex, so two Services never receive the
// same address. Two controller processes never allocate at the same time: portico-controller
// runs its reconcilers only while it holds the leader-election Lease, a replica that fails to
// renew it stops acting (renew deadline) before another can acquire it (lease duration), and a
// new leader rebuilds its allocations from the Services' status with a quorum read before its
// first allocation. Like every Lease-based design this assumes bounded clock skew and no
// process pause longer than the gap between the renew deadline and the lease duration.
package baremetal
