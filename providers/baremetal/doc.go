// Package baremetal is the bare-metal provider: it hands out load-balancer addresses (VIPs)
// from the AddressPools cluster admins declare (api/v1alpha1) and reports them with ipMode VIP;
// portico-agent announces and serves them. It does no node I/O.
//
// Pools are parsed and validated by package addresspool (ranges, overlaps between pools, the
// network and broadcast rule), which the pool status controller (controllers/pool) and the
// agent's announcers share. This package owns:
//
//   - alloc.go: the allocator, pure and table-tested: which address a Service gets, sharing,
//     dual stack, stickiness;
//   - provider.go: the providers.Provider around it, reading pools, Services and namespaces
//     (never writing), with every allocation under one mutex held only for the pure step;
//   - cache.go: where it reads from: pools and namespaces from portico-controller's manager
//     cache, or in portico-ccm from an AddressPool informer of its own; Services always from
//     the API server;
//   - metrics.go: allocation latency and pool usage per pool and family.
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
// # Other allocators
//
// The record holds only the Services this provider serves, but a pool's addresses may also be
// reported by Services it does not serve: another class of the same controller, portico-ccm
// beside portico-controller, another implementation (MetalLB, kube-vip) over overlapping
// ranges, or anyone who wrote a Service's status. claims.go collects them (ForeignClaims: every
// other LoadBalancer Service's status.loadBalancer.ingress IPs, spec.loadBalancerIP and
// loadBalancerIPs annotation), and the allocator never hands one of those addresses to a
// Service: not chosen, not granted on request (the Service is invalid, the message names the
// holder), not adopted from the Service's own status. An address a Service of this provider
// already holds stays its own whoever claims it later. The claims are read on every Ensure
// from the informer's view of every Service (the manager's cache; portico-ccm's own Service
// informer). In portico-controller that view comes from the same watch that delivers the
// Service being ensured, in resourceVersion order, so any claim written before that Service
// was created or changed is seen. Two allocators deciding at the same moment can still pick the
// same free address, which is why the chart refuses two bare-metal allocators (portico-ccm and
// portico-controller both with the baremetal provider) and replicas without leader election.
//
// # A stale cache never causes a duplicate
//
// Pools (and namespace labels) are read from an informer cache on every Ensure and may lag the
// API server. They only say which addresses exist and which Services may use them; whether an
// address is free is decided by the allocator's record, under the mutex, and nothing else. That
// record is rebuilt once, before the first allocation or release, from a quorum LIST of the
// Services straight from the API server (never from a cache: a new leader's cache may not yet
// show the status its predecessor last wrote), and every later Assign and Release updates it
// under the same mutex. A stale pool view therefore can only make a Service wait (a pool not
// seen yet: it pends and is retried after PendingRetry), or hand out a free address of a range
// that was just removed or a pool just deleted (as if the edit had come a moment later; the
// address is recorded as held, so no one else receives it, and it is kept, as after any pool
// edit). It never offers an address the record holds. TestStalePoolsNeverDuplicate feeds the
// provider alternating old and new pool views under concurrent Ensures.
//
// Within one process every decision is made under one mutex, so two Services never receive the
// same address. Two controller processes never allocate at the same time: portico-controller
// runs its reconcilers only while it holds the leader-election Lease, a replica that fails to
// renew it stops acting (renew deadline) before another can acquire it (lease duration), and a
// new leader rebuilds its allocations from the Services' status with a quorum read before its
// first allocation. Like every Lease-based design this assumes bounded clock skew and no
// process pause longer than the gap between the renew deadline and the lease duration.
package baremetal
