// Package netlab builds network labs for real-packet tests: Linux network namespaces for
// nodes, pods, clients and a router, joined by veth pairs and a bridge, with echo servers in
// pods that report the client address they see.
//
// # Topology
//
// A "switch" namespace holds the LAN bridge br0. Every node, client and the router has an eth0
// plugged into it by a veth, so they all share one L2 segment (ARP/NDP announcements reach the
// clients). Pods hang off their node Calico-style: one namespace per pod, a veth to the node,
// the pod IP as /32 (/128) on the pod's eth0, a default route via 169.254.1.1 (fe80::1) onlink
// answered by the node (proxy ARP; fe80::1 on the node's end), and a /32 (/128) route on the node.
// Every other LAN host routes each node's pod CIDR via that node's LAN address. Nodes and the
// router forward; reverse-path filtering is off and ICMP redirects are neither sent nor
// accepted. There are no default routes except the pods' (to a node, which has none), so no
// packet leaves the lab. Optionally (Options.RootLink) the root namespace, the test process's,
// joins the LAN by one veth at Lab.RootAddr, e.g. for a kube-apiserver the nodes must reach;
// before adding it the lab checks every root route table and refuses (ErrRootRouteOverlap) if
// a route overlaps the lab's block. Nothing routes pod or client traffic to the root.
//
// The lab adds no routes for 198.18.0.0/16, the range reserved for Service ClusterIPs and
// load-balancer VIP pools, nor for its IPv6 counterpart fd00:c613:ff00::/40 (outside every
// slot's /48; see cluster.ServiceCIDR6): a test adds what its scenario needs (an on-link route on clients for
// L2 announcements, a route via the router for BGP) with Host.Exec.
//
// # Address plan
//
// Lab addresses come only from 198.19.0.0/16 and fd00:c613::/32 (c613 is 198.19 in hex; the
// machine's uplink uses fd00::/64, which it must never overlap). A lab in slot N (0..15) uses:
//
//	IPv4 block        198.19.(16N).0/20
//	LAN               198.19.(16N).0/24        router .1, nodeI .(10+I), clientI .(100+I), root .254
//	pod CIDR of nodeI 198.19.(16N+I).0/24      I = 1..12; pod J of the node is .J
//	IPv6 block        fd00:c613:N::/48
//	LAN               fd00:c613:N::/64         same host digits, read as hex: node1 is ::11
//	pod CIDR of nodeI fd00:c613:N:I::/64       pod J is ::J (digits read as hex)
//
// 198.19.(16N+13..15).0/24 and the rest of the /48 are unused, kept for later links such as
// networks behind the router. The root link carries IPv4 only, unless Options.RootLink6 gives it the
// LAN's ::254 too (Lab.RootAddr6).
//
// # Ownership and cleanup
//
// A lab owns every namespace named "<id>-*" and the root-namespace link "<id>-root", where id
// is "pt" and six random hex digits (namespaces: <id>-switch, <id>-node1, <id>-client1,
// <id>-router, <id>-node1-<pod>). Inside namespaces, interfaces are named plainly: eth0 on every
// host, br0 and one port per host in the switch, vethJ for pod J on a node.
//
// State lives in /run/portico-netlab: slot-N.lock, and lab-<id> recording the owner's pid and
// start time. A lab holds an exclusive flock on both for its life, so several test binaries can
// run labs at once, each in its own slot (New waits up to two minutes for a free one).
// Close, which New registers with t.Cleanup, kills the lab's processes and every other process
// left in its namespaces, deletes the root link and the namespaces, then removes the record and
// releases the slot. Processes run with Pdeathsig=SIGKILL, so they die with an interrupted test
// binary; what such a binary left behind is removed by Sweep, which New calls first: it tears
// down every lab whose owner process is gone.
//
// # Processes and sockets
//
// Host.Run and Host.Exec run commands in a namespace through `ip netns exec`. Host.Do, DialTCP,
// DialUDP, Listen and Request work in-process: they switch one locked OS thread into the
// namespace, create the socket, and switch back. StartEchoServer runs e2e/tools/echoserver,
// built once per source version into Portico's cache by e2e/framework/gobuild.
//
// Labs need root and iproute2. Without them New fails the test naming the fix (`make prereqs`,
// run as root), or skips it when the user set PORTICO_SKIP_PRIVILEGED=1 (see internal/prereq).
package netlab
