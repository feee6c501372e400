// Package bgp is the end-to-end suite of BGP announcement: a real control plane, the real
// portico-controller (bare-metal provider) and three real portico-agents (--announce=bgp) in
// netlab node namespaces, and bird2 in the client namespace as the router, peering with every
// agent over IPv4 and IPv6 with BFD and an MD5 password. The tests read the router's routes
// with birdc, request the VIP through them from the router's namespace, and check withdrawal
// on endpoint loss, node exclusion and graceful agent shutdown, and that a wrong password
// leaves no session and says so in the BGPPeer status. Needs root, iproute2, iptables and
// bird2 (`make prereqs`).
package bgp
