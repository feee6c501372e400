// Package bgp is the end-to-end suite of BGP announcement: a real control plane, the real
// portico-controller (bare-metal provider) and three real portico-agents (--announce=bgp) in
// netlab node namespaces, and bird2 (e2e/framework/router) in the client namespace as the router, peering
// with every agent over IPv4 and IPv6 with BFD and an MD5 password, with a client namespace
// behind it. The tests read the router's routes with birdc, request the VIP through them from
// behind the router, and check withdrawal on endpoint loss, node exclusion and graceful agent
// shutdown, and that a wrong password leaves no session and says so in the BGPPeer status.
//
// TestBGPFailover and BenchmarkBGPFailover lose a node through the whole stack: the client
// behind the router requests the VIP of an externalTrafficPolicy Local Service every 50 ms, a
// node's link is cut, and they measure the time until bird has dropped that node's next hop
// (with BFD 100 ms x 3, and in the benchmark also without: hold time 9 s) and the requests
// that failed meanwhile and in the 5 s after. A trial starts from the state it measures from
// (every next hop in the router's kernel, the node's BFD session Up, checked again right before
// the cut); a trial during which another node's session went down (on a loaded machine BFD
// 100 ms x 3 expires on every session at once) is run again, at most twice, and reported.
// Needs root, iproute2, iptables and bird2 (`make prereqs`).
package bgp
