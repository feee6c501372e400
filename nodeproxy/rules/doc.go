// Package rules renders Services into iptables-restore input for portico-agent. It is pure: a
// Builder turns rules.ServicePort values (one Service port, one IP family, with its endpoints
// and which of them run on this node) into a Ruleset, the complete content of every chain the
// agent owns, keeping each port's rendering so a change re-renders only the changed ports;
// RestoreInput turns a Ruleset into `iptables-restore --noflush` input, in full or as the
// difference from the last applied Ruleset (or from the kernel's chains, read by ParseSave);
// Jumps are the only rules outside the owned chains; CleanupInput removes the owned chains.
//
// # Why the rules look the way they do
//
// On these machines iptables is iptables-nft 1.8.9, and restore cost grows with the number of
// chains far more than with the number of rules: kube-proxy's layout (a KUBE-SVC chain per
// service port plus a KUBE-SEP chain per endpoint: 111k chains at 10,000 Services x 10
// endpoints) took 10 s at 1,000 x 10 and did not finish in 20 minutes at 10,000 x 10. Measured
// while designing (same input shape, loaded 2-core machine): 10,000 chains of 10 DNAT rules took
// 12 s to restore; the same 100,000 DNAT rules spread over 256 chains took 3-6 s. So the agent
// keeps the chain count bounded by design, not by the number of Services or endpoints:
//
//   - Service addresses are spread over at most 256 "bucket" chains PTC-SVC-00..PTC-SVC-FF by the
//     last byte of the destination address. nat PTC-SERVICES holds one jump per non-empty bucket,
//     matching that byte with a non-contiguous mask (-d 0.0.0.42/0.0.0.255; ::2a/::ff for IPv6).
//     A new connection walks at most 256 cheap mask matches plus one bucket (about 1/256 of the
//     rules), instead of kube-proxy's one rule per service port in KUBE-SERVICES.
//   - Inside a bucket, every rule of a destination (ClusterIP, externalIP or LB IP, plus port and
//     protocol) carries the full destination match and DNATs directly: rule i of n endpoints uses
//     `-m statistic --mode random --probability 1/(n-i)`, the last is unconditional. There is no
//     per-endpoint chain.
//   - ClientIP affinity lives in the same rules: one `-m recent --rcheck --seconds T --reap` rule
//     per endpoint first, and `-m recent --set` on the selecting rule. The list of an endpoint is
//     "PTC-" + hash(service port, endpoint), shared by every address of the port.
//   - NodePorts are bucketed the same way by port >> 6 (PTC-NP-<n>, 64 ports each), dispatched
//     from PTC-NODEPORTS by port range; PTC-NODEPORTS is jumped to from the end of PTC-SERVICES
//     for local destinations (or for the --nodeport-addresses only: matching local addresses and,
//     with "primary", the Node's primary IP; loopback never).
//   - Masquerading is decided with a mark (bit --masquerade-bit, default 12: 0x1000; kube-proxy
//     uses 14) set by `-j MARK --or-mark` (not a chain) and acted on in PTC-POSTROUTING, which
//     clears it and masquerades with --random-fully. ClusterIP traffic from outside
//     --cluster-cidr is marked through the static chain PTC-MARK-OFFCLUSTER; external traffic
//     with externalTrafficPolicy: Cluster is always marked.
//   - Hairpin (a pod reaching itself through a Service) needs no per-endpoint chain: only a local
//     endpoint can be hairpinned on this node, so PTC-POSTROUTING has one
//     `-s IP -d IP -j MASQUERADE` rule per local endpoint IP.
//   - externalTrafficPolicy: Local is the only case that needs per-service chains, because
//     external traffic branches three ways: PTC-X-<hash> sends traffic from --cluster-cidr to
//     PTC-C-<hash> (cluster-wide endpoints, not masqueraded: the "short-circuit"), marks and
//     sends node-originated traffic there too, and balances everything else over the local
//     endpoints without masquerading (the client address is kept). <hash> is the first 16
//     base32 characters of SHA-256("namespace/name:portName/protocol").
//   - filter PTC-SERVICES (from INPUT, OUTPUT and, through PTC-FORWARD, FORWARD; new connections
//     only) rejects traffic to ports without endpoints (ICMP port unreachable: a fast "connection
//     refused"), drops external traffic of Local ports without local endpoints and ClusterIP
//     traffic of internalTrafficPolicy: Local ports without local endpoints, accepts the
//     health-check node ports, and enforces loadBalancerSourceRanges: it runs after DNAT, so it
//     matches the original LB IP and port through conntrack (--ctorigdst, --ctorigdstport) and
//     RETURNs for allowed sources before a DROP. The order is every port's rejects and drops,
//     then the source ranges, then the accepts: an allowed source's RETURN leaves the chain, so
//     it must not come before the drop of a Local port without a local endpoint. PTC-FORWARD then accepts marked packets and
//     established connections, so NodePort traffic passes a DROP forward policy.
//   - Endpoints: ready ones; when none is ready, serving-and-terminating ones (separately for
//     the cluster-wide and the local set). The cluster-wide set follows topology hints as
//     kube-proxy does: the ready endpoints hinted for this node when every ready endpoint has
//     node hints (PreferSameNode), else those hinted for the node's zone when every ready one has
//     zone hints (PreferSameZone/PreferClose), else all. A zone label change is a full sync.
//
// # Ownership
//
// Every chain the agent creates, in nat and filter of both families, and every `-m recent` list,
// is named with the prefix "PTC-" (rules.Prefix). The only rules outside those chains are one
// jump per built-in chain (nat PREROUTING, OUTPUT, POSTROUTING; filter INPUT, FORWARD, OUTPUT),
// inserted first with go-iptables and carrying the comment "portico-agent" (rules.Jumps). The
// agent never reads, writes or deletes any other chain or rule. --cleanup deletes the jumps, then
// flushes and deletes every PTC- chain found by iptables-save.
//
// # Restore input
//
//   - A partial sync (the difference from the last applied Ruleset) writes only the chains whose
//     content changed: the touched buckets, PTC-SERVICES if the set of buckets changed,
//     PTC-POSTROUTING if local endpoints changed, the filter chain if a reject/drop/accept
//     changed. Chains that disappeared are flushed and deleted in the same transaction. A
//     one-endpoint change therefore rewrites one bucket (about 1/256 of the rules) whatever the
//     number of Services.
//   - A full sync compares with the kernel's chains (ParseSave of one iptables-save): it writes
//     only the chains whose rules differ (or that are missing) and deletes unknown PTC- chains.
//     Rules are rendered exactly as iptables-save prints them (`--set-xmark`, `--reject-with`,
//     the 11-digit probability xt_statistic stores, `-m recent` with its mask, the match order),
//     so without drift a full sync restores nothing. Should another iptables version print a
//     rule differently, its chain is merely rewritten on every full sync.
//
// # Limits
//
// No INVALID-state drop (kube-proxy's workaround for "connection reset by peer", which broke
// multihomed setups; set nf_conntrack_tcp_be_liberal instead); the filter chain is rewritten
// whole when any reject/drop/source range changes (it holds only ports without endpoints and
// LoadBalancer ports with source ranges). Source ranges are applied per family: a
// Service whose ranges are all of one family leaves its LoadBalancer IPs of the other family
// open.
package rules
