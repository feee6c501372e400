// Package election owns the rule that picks, for each load-balancer VIP, the one node that
// announces it on layer 2 (answers ARP / NDP for it). It is pure: every agent feeds it the same
// inputs (the Node objects, the membership view, the pool's L2 node selector and, for
// externalTrafficPolicy: Local, the nodes with a ready local endpoint) and gets the same answer,
// so no coordination beyond the membership gossip is needed. Anything else that needs to know
// the announcer (metrics, an Event when it changes, the controller) imports this package rather
// than re-deriving the rule.
//
// # The rule
//
// Candidates are the nodes that are
//   - alive in the membership view (package membership; when the agent runs without membership
//     every node counts as alive and liveness comes from Kubernetes only),
//   - eligible for external load balancers as upstream defines it (servicerules.NodeEligible: not
//     being deleted, no node.kubernetes.io/exclude-from-external-load-balancers label, no
//     ToBeDeletedByClusterAutoscaler taint),
//   - not NetworkUnavailable (the condition is absent or not True),
//   - matched by the pool's L2 node selector (nil matches every node),
//   - for externalTrafficPolicy: Local, hosting a ready endpoint of the Service.
//
// They are ordered by SHA-256 of "<node name>#<VIP>" (the VIP in its canonical text form), ties
// (never seen in practice) by name; the first one announces. Hashing per VIP spreads the VIPs
// over the nodes, removing a node moves only the VIPs it announced, and adding one moves only
// the VIPs for which it sorts first.
//
// # Partitions
//
// The rule is only as consistent as its inputs. When the node LAN splits, each side's
// membership declares the other side dead within the detection time, each side elects a winner
// among its own members, and a VIP whose winner is on the other side gets a second announcer:
// two nodes answer ARP/NDP for it. A client's neighbour cache then holds whichever MAC it heard
// last (the gratuitous announcement sent at takeover, or the reply to its next solicitation),
// so clients on either side reach a node on their side, and a client that sees both keeps the
// later one. Nothing is fenced: this is "two announcers rather than none", the same trade as
// MetalLB's. When the partition heals, the memberships merge (the agents rejoin their peers), every
// agent again computes the same single winner, the loser stops answering, and the winner
// re-announces (it sees a change of view and sends gratuitous ARP / unsolicited NA again), which
// moves the clients' caches back to one MAC.
package election
