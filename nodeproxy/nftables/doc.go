// Package nftables is portico-agent's second dataplane (--proxy-mode=nftables): the same
// Services, fed by the same tracker and package serviceports, with the semantics of the iptables
// mode (package netfilter, package rules' doc.go), programmed into nf_tables over netlink with
// github.com/google/nftables (no nft binary). Proxier is a consumer of the agent's sync loop:
// per IP family it renders the changed service ports (render, pure) and applies the difference
// in one netlink batch, which the kernel commits atomically or not at all.
//
// # Ownership
//
// The agent owns one table, "portico" (TableName), in the ip and in the ip6 family, and touches
// nothing else: other tables (kube-proxy's, firewalld's, iptables-nft's "ip nat"/"ip filter")
// coexist. --cleanup deletes the two tables.
//
// # Layout
//
//   - Base chains: nat-prerouting and nat-output (dstnat) jump to services; nat-postrouting
//     (srcnat) to masquerading; filter-prerouting and filter-output (dstnat - 10, before DNAT, so
//     they see LoadBalancer IPs) send new connections through the firewall-ips verdict map
//     (loadBalancerSourceRanges); filter-input, filter-forward and filter-output-post-dnat
//     (filter - 10, after DNAT: the node's own connections that externalTrafficPolicy: Local
//     short-circuits to any endpoint are not dropped) send new connections through
//     no-endpoints.
//   - Dispatch is by verdict maps keyed on address . protocol . port: service-ips (ClusterIPs,
//     externalIPs, LoadBalancer IPs : goto the port's chain) and, for local destinations
//     (fib daddr type local, not loopback; or the --nodeport-addresses), service-nodeports
//     (protocol . port). no-endpoint-services and no-endpoint-nodeports hold the rejects (goto
//     reject: ICMP port unreachable) and the drops of Local traffic policies without a local
//     endpoint.
//   - Per service port, chains named kind-namespace/name/protocol/port: int- (the ClusterIP:
//     mark off-cluster sources, balance), ext- (external destinations: mark and balance; with
//     externalTrafficPolicy: Local, pods' and the node's own traffic goes to clu- with all
//     endpoints, everything else to the local endpoints, source kept), fw- (source ranges:
//     return for allowed sources, drop the rest).
//   - Balancing: one rule, `dnat to numgen random mod N offset B map @endpoints-XX` (a plain
//     DNAT for one endpoint). The endpoints live in 256 named maps (endpoints-00 to -ff, the
//     shard a hash of the chain's name), each chain in its own range of keys (B + index :
//     address . port; a power of two, at least 16, kept while the endpoints fit). Named maps
//     instead of an anonymous map per rule keep a full sync linear in the kernel, and a change
//     of endpoints that keeps their number is a change of map elements only, which the kernel
//     commits without re-validating the table's jumps; the shards bound the kernel's check of
//     every element of a map against every rule that uses it (more shards make each rule's
//     lookup of its map by name, a walk of the table's sets, longer: 256 cost the kernel less
//     than 64 or 1,024 in a full sync at 10,000 Services). ClientIP affinity: a dynamic map per chain
//     (client address : endpoint, with the Service's timeout) read first and updated on a new
//     choice; its name carries a hash of the endpoints, so a change of endpoints starts a new map
//     and no client sticks to a removed endpoint.
//   - Masquerading: the mark bit of --iptables-masquerade-bit, set by mark-for-masquerade and
//     mark-offcluster (sources outside --cluster-cidr), cleared and masqueraded (fully random) in
//     masquerading; hairpin traffic (a local endpoint reaching itself) is masqueraded through the
//     hairpin set (endpoint . endpoint).
//
// # Syncs
//
// A partial sync writes only what changed: the elements of the shared maps the changed ports
// add, change or remove, the chains whose rules changed (flushed and refilled), and the chains
// no longer used (deleted). A one-endpoint change is an element change in an endpoints map (a
// chain rewrite when the number of endpoints changes). A full sync (at start,
// after a failed transaction, and every --iptables-sync-period when anyone else committed to
// nf_tables since the agent's last commit) flushes and rewrites every chain and map of the
// table in one transaction and deletes what the agent no longer wants, so any drift (a flushed
// chain, a deleted rule or element) is repaired and traffic never sees a half-written table;
// affinity sets of unchanged endpoints are kept with their clients. nf_tables' generation
// (NFT_MSG_GETGEN, one per network namespace, incremented by every commit) tells the two apart:
// when it is still the one the agent's own last commit left (genTracker), the periodic full
// sync renders every Service again and writes only the difference, usually nothing.
// Stale UDP conntrack entries are deleted as in the iptables mode (netfilter.StaleUDP).
//
// google/nftables builds each transaction's messages; the Proxier sends them itself, as one
// batch in one sendmsg without asking an acknowledgement or an echo of each message (the
// library's v0.3.0 asks for both and reads every answer on its own), then reads the kernel's
// refusals, if any, up to the answer of a generation request sent after the batch (conns).
//
// # Limits
//
// A commit by another tool to any table of the namespace (kube-proxy, firewalld, iptables-nft)
// makes the next periodic full sync rewrite the table, drifted or not; an accept in this table
// does not override another table's drop (a DROP
// policy in iptables' FORWARD chain still needs its own accepts); nft(8) prints the anonymous
// affinity maps' keys in the wrong byte order (0, 16777216, ...): the kernel compares them
// with numgen's value as written. When two Services claim one address and port, the one whose
// port key sorts first has it.
package nftables
