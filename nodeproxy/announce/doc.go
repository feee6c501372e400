// Package announce is where the agent's VIP announcers live: l2 (ARP/NDP), later bgp, and
// election, the one rule for which node announces a VIP on layer 2. This file sketches how they
// join portico-agent; the integration follows the split of nodeproxy into a change tracker and a
// sync loop driving consumers (not merged yet when this was written).
//
// # Inputs from the tracked state
//
// The election for a VIP needs, on every agent alike:
//   - the Node objects (the tracker already watches this Node; it must watch all Nodes for
//     eligibility, labels for the pool's L2 nodeSelector, and InternalIPs for membership peers);
//   - the membership view (package membership): its Changes channel is one more event source of
//     the sync loop, like an informer event, and triggers a partial sync of the announcer only;
//   - the Services of type LoadBalancer with their status.loadBalancer.ingress IPs (the
//     allocator's record), externalTrafficPolicy, and for Local the nodes with a ready endpoint
//     (from the EndpointSlices the tracker already follows);
//   - the AddressPool that holds each VIP (spec.announce.l2.nodeSelector and .interfaces).
//
// The L2 consumer then computes, for each VIP, election.Winner; the VIPs this node wins, with the
// pool's interfaces (or the interface holding the node IP when the pool names none), are passed
// to l2.Announcer.Set in one call per sync, and a full sync repeats it (the announcer reopens
// failed sockets then). When the view grows (a healed partition), the consumer calls
// Reannounce so that clients that followed the other side come back. An agent must join its
// peers (membership.SetPeers, which blocks for the first join) before its first election: alone
// in its view it would win every VIP. An Event on the Service and a metric record each change of
// announcer.
//
// # No traffic to dead nodes (issue 9, item 5)
//
// Kubernetes takes about 40 s to mark a dead node NotReady and longer to drop its endpoints, so
// after a failover the new announcer would still DNAT a share of the connections to pods on the
// dead node. Every agent therefore filters the endpoints it renders: an endpoint whose nodeName
// membership reports dead is left out of the iptables rules (as if not ready) until Kubernetes
// catches up; when a node reappears in the view its endpoints come back on the next sync. Rules
// for an endpoint set that would become empty keep the dead endpoints instead (better a partial
// outage than rejecting everything when the view itself is wrong, e.g. this node is the one
// partitioned). This needs the rules builder to take a node-liveness filter from the tracker,
// which is part of the split above; it is not implemented yet.
package announce
