// Package l2 announces load-balancer VIPs on layer 2: it answers ARP requests (IPv4, through
// mdlayher/arp on an AF_PACKET socket) and neighbour solicitations (IPv6, through mdlayher/ndp on
// a raw ICMPv6 socket bound to the interface's link-local address) for exactly the VIPs of the
// last Set, with the interface's own MAC, and sends gratuitous ARP (a request and a reply) or
// unsolicited neighbour advertisements (override flag, to ff02::1) when it takes a VIP over:
// Options.Gratuitous rounds, Options.GratuitousInterval apart (by default 4 rounds over 1.5 s).
//
// The API is declarative (MetalLB style): Set takes the complete desired set of VIPs with their
// interfaces; Stop closes every socket and waits for every goroutine. Which VIPs this node must
// answer for is decided by Consumer, the announcer's room in portico-agent's sync loop: it
// elects (package announce/election) among the alive, eligible, selected nodes for every VIP
// of a pool with spec.announce.l2 (package announce, Targets) and calls Set once per sync; it
// records the L2Announcing Event and the l2 metrics (see package announce). Set must run in the network
// namespace of the interfaces, since it opens the sockets (the agent runs in the host's).
// Raw sockets need CAP_NET_RAW.
//
// # The VIP is not a local address
//
// The VIP is never added to an interface, so the kernel neither answers ARP/NDP for it nor
// claims it as a node address (kubelet or a CNI could pick it up, see the reference notes).
// Packets to the VIP arrive with the node's MAC and a destination the node does not own; the
// agent's DNAT in nat PREROUTING rewrites them to an endpoint before the routing decision, so
// they are forwarded to the pod, and conntrack reverses the reply. e2e/suites/l2election proves this
// with real packets for both families.
//
// # What is answered
//
//   - ARP: requests whose target is a VIP, sent to the broadcast MAC or to ours (unicast
//     refreshes of a cached entry), not our own requests.
//   - NDP: solicitations for a VIP arriving on its solicited-node multicast group, which the
//     socket joins per VIP. Solicitations from the unspecified address (duplicate address
//     detection) are answered to all nodes, unsolicited. A client's unicast reachability probe
//     (sent to the VIP itself once its entry went stale) is not delivered to the socket, because
//     the node does not own the VIP; the client then falls back to a multicast solicitation,
//     which is answered, and meanwhile keeps using the cached MAC.
//   - Our advertisements come from the link-local address. Linux and RFC 4861 accept that;
//     ndisc6 (Debian) does not, it only accepts advertisements sourced from the target.
//
// An interface that is missing or lacks an address (arp.Dial needs an IPv4 address on it for IPv4
// VIPs; ndp a link-local one for IPv6 VIPs) is reported by Set and retried by the next Set; a
// responder whose socket fails is reopened by the next Set.
package l2
