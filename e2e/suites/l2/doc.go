// Package l2 is the end-to-end suite of layer-2 announcement by portico-agent: the real
// control plane (e2e/framework/cluster) with the AddressPool CRD, the real portico-controller binary with
// the baremetal provider allocating from a pool with spec.announce.l2, and three real
// portico-agent processes (--announce=l2 --membership) in the node namespaces of a network lab
// (e2e/framework/netlab), one backend pod per node. A client on the nodes' segment reaches the VIPs by
// ARP and NDP alone (an on-link route, no route via a node).
//
// TestL2Announce checks, for IPv4 and IPv6: the client's neighbour entry is the elected node's
// MAC and only that node answers arping; the Service gets an L2Announcing Event from it; then
// the announcing agent is killed (SIGKILL), and separately its node's link is cut: the next
// node in the election order announces, the client's neighbour entries follow, and no request
// fails in the 5 s after it announced. Requests are new TCP connections every 50 ms, so each
// is balanced afresh over the endpoints: after a link cut one in three would go to the cut
// node's pod if the agents did not leave out the endpoints of nodes membership reports dead.
// During the cut the isolated node keeps announcing (a partition has two announcers; the
// isolated one reaches nobody); after the link comes back exactly one node answers and the
// VIPs return to the first node in the order.
//
// TestL2AgentRestart stops the announcing agent with SIGTERM, as a rolling update does: the
// other agents hold its node (their metrics count it restarting, not dead) instead of taking
// its VIPs, and once a new agent runs on the node the client's neighbour entries never left
// it, a held TCP connection through the VIP served on, and no new connection failed; then
// SIGKILL on the same agent still fails over within failoverMax.
//
// TestL2OwnerStall stops the announcing agent with SIGSTOP until the next node has taken its
// VIPs, then lets it run: the owner never saw itself dead, so the next node, withdrawing, asks
// it to announce again, and the client's neighbour entries are back on the owner within
// reassertMax (without the ask they stay on the next node until they expire).
//
// TestLocalPolicyAnnouncesFromEndpointNode puts the only endpoint of an externalTrafficPolicy:
// Local Service on the node that comes last in its VIP's election order: that node announces.
// TestStartupErrors runs the binary with bad announcement flags and without access to
// AddressPools: it exits at once naming every problem.
//
// TestStartLiveAtOnce starts one agent in a lab of its own (its own control plane) where three
// Nodes that run pods of its DaemonSet never answer (their InternalIPs lead to a MAC nobody
// has), a fourth Node runs none, and the API server answers 1 s late (e2e/framework/latency):
// /livez answers within startLiveMax of the start, /readyz and /healthz 503 until the first
// full sync and 200 after it, well before the three joins (10 s each) could have ended; the
// agent's peers are the 3 Nodes with its pods.
//
// TestL2GossipKey runs in a lab of its own (four nodes, its own control plane and controller):
// three agents start at once with --membership-secret naming a Secret that does not exist and
// --membership-create-secret; exactly one creates it and all three share its key and one
// membership. Then, under traffic to a VIP (traffic.Load: held connections and a new
// connection every 50 ms), the key is rotated by the three edits of docs/membership.md, each
// awaited on every agent (portico_agent_membership_keys): no request fails, no held connection
// breaks, no agent's view changes, no VIP is announced again, the client's neighbour entry stays
// on the owner and no message fails to decrypt. Last, an agent on the fourth node with another
// key (a key file) cannot join; it and the three count decryption failures
// (portico_agent_membership_decrypt_failures_total), and it reports a MembershipDecryptFailed
// Event on its Node.
//
// BenchmarkL2Failover repeats both failures (-l2agent.trials, 10 by default) and reports the
// median and worst time from the failure to the client's neighbour entry moving to the new
// node, and the requests failed in the 5 s after.
package l2
