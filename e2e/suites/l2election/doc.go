// Package l2election tests layer-2 announcement without a control plane: three node namespaces
// of an e2e/framework/netlab lab each run e2e/tools/l2node (membership + election + ARP/NDP announcer) for
// one IPv4 and one IPv6 VIP, every node DNATs the VIPs to a pod of its own (as the agent's
// iptables rules do), and a client on the LAN probes the VIPs over UDP every 50 ms while the
// announcing node is killed, stopped abruptly, or cut off the LAN. It measures the time from the
// failure until the client's neighbour entry moves to the new announcer and until the client is
// served through it, and counts probes lost after that.
//
// Run as root: go test ./e2e/suites/l2election -v [-l2.trials N]. It needs iproute2, iptables,
// ip6tables and arping (Debian: iproute2 iptables iputils-arping; `make prereqs` installs them)
// and fails naming them when missing.
package l2election
