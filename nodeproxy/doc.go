// Package nodeproxy is portico-agent, the per-node dataplane: a change tracker (informers on
// Services, EndpointSlices and this Node) feeding one rate-limited sync loop that renders every
// Service into iptables rules (package rules) and applies them with one
// `iptables-restore --noflush` per family per sync. It also serves the healthCheckNodePorts of
// externalTrafficPolicy: Local Services, /healthz, /livez and /metrics, and removes everything it
// installed with --cleanup.
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
//     RETURNs for allowed sources before a DROP. PTC-FORWARD then accepts marked packets and
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
// # Syncs
//
// Informer events only record which Services changed and add the single key "sync" to a
// client-go rate-limiting workqueue, so bursts coalesce; a golang.org/x/time/rate limiter holds
// syncs to one per --min-sync-period, and a failed sync is retried with the queue's exponential
// back-off (0.5 s to 30 s) as a full sync.
//
//   - A partial sync re-renders only the changed Services' ports (package rules caches the rest)
//     and writes only the chains whose content changed: the touched buckets, PTC-SERVICES if the
//     set of buckets changed, PTC-POSTROUTING if local endpoints changed, the filter chain if a
//     reject/drop/accept changed. Chains that disappeared are flushed and deleted in the same
//     transaction. A one-endpoint change therefore rewrites one bucket (about 1/256 of the
//     rules) whatever the number of Services.
//   - A full sync re-renders everything, reads the kernel's PTC- chains and the built-in chains
//     with one iptables-save, writes only the chains whose rules differ from the kernel's (or
//     that are missing), deletes unknown PTC- chains, and re-inserts missing jump rules. Rules
//     are rendered exactly as iptables-save prints them (`--set-xmark`, `--reject-with`, the
//     11-digit probability xt_statistic stores, `-m recent` with its mask, the match order), so
//     without drift a full sync restores nothing: at 10,000 Services it costs one iptables-save
//     (about 1.5 s here) instead of restoring every chain. It runs at start, after any failure,
//     when the Node's addresses change and every --sync-period, which repairs drift (a flushed or
//     edited chain, a deleted jump). Should another iptables version print a rule differently,
//     its chain is merely rewritten on every full sync; the metric
//     portico_agent_sync_proxy_rules_chains_restored_total{sync="full"} shows it. Exiting never
//     flushes rules, so established connections survive a restart.
//   - After a sync, UDP conntrack entries whose original destination is a changed UDP service
//     address or NodePort and whose reply source is not a serving endpoint are deleted over
//     netlink in one pass: entries of removed endpoints, and entries created while the port had
//     no endpoint.
//
// # Health
//
// Each externalTrafficPolicy: Local Service with a healthCheckNodePort gets an HTTP server on
// that port answering any path with 200 when it has a ready local endpoint and the agent is
// healthy, else 503, and the JSON body {"service":{"namespace","name"},"localEndpoints",
// "serviceProxyHealthy"}. /healthz is 503 when a change has waited more than 2 x --sync-period
// or the Node is being deleted (deletionTimestamp, ToBeDeletedByClusterAutoscaler taint) or
// unknown, or when one IP family's syncs have been failing for that long; its body reports each
// family under "families" ({"IPv4": {"healthy", "lastUpdated"}}). /livez ignores the node. A
// healthCheckNodePort that cannot be opened is retried on every sync and reported once, as
// kube-proxy does, by a Warning Event FailedToStartServiceHealthcheck on the Service. Metrics carry kube-proxy's names with the prefix
// "portico_agent_" instead of "kubeproxy_".
//
// # Limits
//
// No localhost NodePorts (route_localnet; kube-proxy's nftables mode has none either), no
// INVALID-state drop (kube-proxy's workaround for "connection reset by peer", which broke
// multihomed setups; set nf_conntrack_tcp_be_liberal instead); the filter chain is rewritten whole when any reject/drop/source range changes (it holds only
// ports without endpoints and LoadBalancer ports with source ranges).
package nodeproxy
