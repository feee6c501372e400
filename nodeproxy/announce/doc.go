// Package announce is where the agent's VIP announcers live: l2 (ARP/NDP; BGP joins the same
// way), election (the one rule for which node announces a VIP on layer 2), and, in this
// package, Targets: the VIPs to announce and what their choice depends on, computed alike by
// every announcer and every agent.
//
// # How an announcer joins portico-agent
//
// An announcer is a Consumer of the agent's sync loop (package nodeproxy), registered by name
// in nodeproxy/announcers.go and selected with --announce (config.KnownAnnouncers). It runs
// after netfilter and the health checks on every sync, so that the rules (without the
// endpoints of dead nodes, below) are in place before a VIP draws traffic to this node. When
// the rules failed in a sync (State.RulesFailed), an announcer withdraws as usual but announces
// nothing it was not announcing before that sync (l2: no VIP new to this node; bgp: no new
// prefix, no prefix to a new peer) until a sync programs the rules. With
// any announcer the tracker (package tracker, tracker.Options) watches every Node and the
// AddressPools, and tracker.State carries:
//
//   - Store.Nodes(): the Node objects (eligibility by servicerules.NodeEligible and the
//     NetworkUnavailable condition, labels for a pool's node selector, InternalIPs for the
//     membership peers); a Node change that matters to elections (labels, addresses, taints,
//     condition statuses, deletion; not heartbeats) queues a sync;
//   - Store.AddressPools(): the pools; a spec change queues a sync;
//   - Alive and Dead: the membership view (package membership). A change of the view marks
//     the Services with endpoints on the nodes concerned and queues a sync that skips the
//     loop's rate limiter (--min-sync-period), so a failover waits neither for the limiter
//     nor for a full sync;
//   - the Services with their status.loadBalancer.ingress IPs (the allocator's record),
//     externalTrafficPolicy and EndpointSlices, as for every consumer.
//
// Targets turns these into one Target per VIP of an AddressPool held by a Service of the
// classes a Portico bare-metal provider serves (Classes: --announce-classes,
// --announce-classless; VIPs of no pool, and VIPs only other classes' Services hold, belong to
// another implementation or were written by someone else and are left alone): the pool, the
// Services holding the VIP, and for externalTrafficPolicy: Local the nodes with a ready
// endpoint. classes.go says why the class, and not a mark in the status, decides. Announcers recompute every VIP
// on every sync: an election reads Nodes, pools and the view, which no Service change list
// covers, and costs one hash per candidate node and VIP.
//
// The agent starts membership (with --membership) after its caches synced and joins the
// agents of the Nodes that run one (the InternalIPs of the bind address's family of the Nodes
// with a pod of its DaemonSet; nodeproxy/peers.go) in the background, without waiting: until
// they have joined (at most 5 s) its first syncs presume them alive (settling), since an agent
// alone in its view would win every VIP. It keeps the peer list current and leaves gracefully
// on exit, after the announcers stopped answering.
//
// # Layer 2 (package l2)
//
// l2.Consumer computes, for each VIP of a pool with spec.announce.l2, election.Winner among the
// eligible nodes that match the pool's node selector and that membership reports alive (with
// Local, only nodes with a ready endpoint). The VIPs this node wins are passed, with the pool's
// interfaces (or the interfaces holding an address on the VIP's subnet, else the one holding
// the node's InternalIP of its family), to l2.Announcer.Set in one call per sync; a full sync
// repeats it and so reopens failed sockets. When the view grows (a healed partition) and the
// node still announces something, it calls Reannounce so that clients that followed the other
// side come back. The new announcer of a VIP records a Normal L2Announcing Event on each
// Service holding it, related to its Node ("node N announces VIP by ARP (previously: M)"; one
// per Service and sync, since the events library folds Events that differ only in their note
// into a series: a node taking the same Service over again counts up its series) and
// counts portico_agent_l2_takeovers_total when another node announced it before; the gauge
// portico_agent_l2_announced{vip} shows what a node answers for.
//
// # Partitions
//
// A node cut off from the others sees them all dead and announces every VIP it may, while the
// others elect among themselves: two announcers. The isolated one reaches nobody on the
// segment it lost, so clients follow the majority's gratuitous announcements. When the link
// comes back, the agents' rejoin loop (--membership-rejoin-interval) merges the views, the
// election gives every VIP one announcer again, the loser withdraws, and the winner, whose view
// grew, re-announces. e2e/suites/l2 tests this (a cut of the announcing node's link, then the
// heal: only one MAC answers arping again within seconds). There is no fencing: during the
// merge both may answer for a moment.
//
// # No traffic to dead nodes
//
// Kubernetes takes about 40 s to mark a dead node NotReady and longer to drop its endpoints, so
// after a failover the new announcer would still send a share of the connections to pods on
// the dead node. Every agent therefore leaves out of its rules the endpoints whose nodeName is
// in State.Dead (package serviceports, Node.Dead): nodes that were alive in the view and left
// it, until they come back. Dead includes agents stopped gracefully (memberlist v0.5.4's leave
// notification does not tell a failure from a leave), which costs capacity, not
// availability, while an agent restarts. An endpoint set that would be left with no ready
// endpoint keeps the dead ones instead: better a partial outage than rejecting everything
// when the view itself is wrong (this node being the one cut off). Without --membership
// nothing is left out.
package announce
