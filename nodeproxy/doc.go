// Package nodeproxy is portico-agent, the per-node dataplane. Run wires its rooms:
//
//   - tracker: informers on Services, EndpointSlices and this Node (every Node and the
//     AddressPools when announcers run); it records which Services changed and queues a sync,
//     and offers the State every consumer reads;
//   - the sync loop (this package): one rate-limited loop that hands the same tracker.State to
//     every Consumer, in order, and retries failures as full syncs;
//   - netfilter (--proxy-mode=iptables): the iptables programmer, a Consumer: per IP family it
//     renders the changed Services with package rules and applies them with one
//     `iptables-restore --noflush`, then deletes stale UDP conntrack entries; it also owns
//     --cleanup;
//   - nftables (--proxy-mode=nftables, the default): the other programmer, in its place: the
//     same Services in one nf_tables table per family, over netlink (agent.go's dataplane picks
//     one; Run probes the kernel for it at startup);
//   - none (--proxy-mode=none, announce-only): neither programmer nor health-check servers;
//     the node's other service proxy (kube-proxy) does both, and the loop drives membership and
//     the announcers alone. With a programmer, Run refuses to start where it finds another
//     proxy's rules (otherproxy.go: kube-proxy's nftables table or KUBE-SERVICES chain) unless
//     --ignore-other-proxy; with none it removes its own leftover rules of a dataplane mode;
//   - healthcheck: the healthCheckNodePort servers (a Consumer) and the agent's own /healthz,
//     /readyz and /livez;
//   - membership (--membership): which nodes' agents are alive, known within a second
//     (hashicorp/memberlist); started before the first sync, its peers (peers.go: the Nodes
//     with a pod of the agent's DaemonSet) joined in the background (liveness.go); a starting
//     agent counts the nodes of agents that have not joined yet as alive for up to 5 s
//     (liveness.go's settling), so that the first agent of a fresh install does not announce
//     every VIP until the others join; its keys come from a Secret the agents create when it is
//     missing (one conflict-safe Create) and watch, so that a key rotates without a restart,
//     and decryption failures are counted and reported (membershipkeys.go);
//   - announce: the VIP announcers (--announce=l2,bgp: ARP/NDP in announce/l2, BGP in
//     announce/bgp), Consumers registered in announcers.go (BGP in announcers_bgp.go, left out by
//     the build tag portico_nobgp) and run after netfilter and the health checks; package
//     announce explains how they join;
//   - serviceports: the pure translation of a Service and its EndpointSlices into the service
//     ports of one family (endpoint conditions, topology hints, traffic policies; source ranges,
//     affinity and node eligibility by package servicerules, the rules the controller applies
//     too, and AddressPools read by package addresspool).
//
// The agent links no provider and no controller: the rules it shares with portico-controller
// live on the ground floor (servicerules, addresspool), and internal/deprules checks it.
//
// The rule layout (address buckets, DNAT without per-endpoint chains, the PTC- prefix and what
// the agent owns in netfilter) is described in package rules.
//
// # Consumers
//
// A Consumer (Name, Sync(ctx, *tracker.State) error) is how a room joins the loop; a VIP
// announcer (ARP/NDP or BGP) is one more Consumer, registered by one line in announcers.go,
// without touching netfilter.
// On every sync each consumer gets:
//
//   - State.Changed, the Services changed since the last successful sync, sorted, and
//     State.Full: on a full sync Changed lists every Service, and a consumer must converge to
//     exactly that set (forgetting anything else it holds); on a partial sync only the listed
//     Services changed (a listed Service that is gone reads as nil);
//   - State.Service(key): the Service (spec, status.loadBalancer.ingress with ipMode,
//     externalTrafficPolicy, healthCheckNodePort) and its EndpointSlices (endpoints with their
//     nodeName and ready/serving/terminating conditions), read-only, as the informer caches
//     held them when the sync began (tracker.Snapshot): every consumer of one sync sees the
//     same objects, and what changes meanwhile comes with the next sync to all of them, so an
//     announcer never attracts traffic for a VIP the rules do not have yet;
//     State.Store.Services() lists every Service of that snapshot, so a consumer that wants
//     the complete state on every sync can have it;
//   - State.Node (nil until the Node exists) and State.NodeEligible (the controller's rule:
//     known, not being deleted, not excluded from load balancers);
//   - State.Store.Nodes() and State.Store.AddressPools() (every Node and the pools when
//     announcers run; this Node alone and no pools otherwise);
//   - State.Alive and State.Dead, the membership view (nil without --membership): netfilter
//     leaves out endpoints on Dead nodes unless none would remain (package announce, "No
//     traffic to dead nodes"), announcers elect among Alive.
//
// A consumer returns an error to have the sync retried: the loop puts the changes back into the
// tracker, and the retry (with the queue's exponential back-off, 0.5 s to 30 s) is a full sync
// for every consumer. Every consumer runs on every sync even when an earlier one failed: the
// rooms are independent (before the split, the health-check servers were not updated after a
// failed restore; now they are, and /healthz still turns unhealthy after 2 x --sync-period of
// failures). When the rules programmer failed, the consumers after it get State.RulesFailed:
// the announcers then withdraw as usual but announce nothing they were not announcing already,
// since the kernel may lack this sync's rules (a VIP announced in such a sync drew traffic to a
// node with no rule for it, which has no route for it either: "network is unreachable" for the
// first packets, until the retry). Consumers run in order on the loop's goroutine; Sync must not
// keep State.
//
// Run's steps are one function each (agent.go): listen (the ports of /healthz, /readyz, /livez
// and /metrics, bound before any call to the API server; a port in use, as kube-proxy's, stops
// the agent naming it), serveHTTP (from then on /livez answers), startEvents, startConsumers
// (netfilter, health checks, membership, announcers; stopped in reverse order at exit) and
// syncUntilDone.
//
// # Start
//
// Nothing the agent waits for at start keeps it from being live: /livez answers before the
// first call to the API server, and a change counts against its timeout only once the caches
// have synced (a slow API server is not a stalled agent); membership joins run in the
// background (package membership: one memberlist Join per missing peer, retried with
// back-off), so peers that do not answer (a powered-off node costs memberlist's 10 s TCP
// timeout per join) delay nothing. /readyz and /healthz answer 503 until the first full sync.
// The chart probes startup and liveness on /livez and readiness on /readyz.
//
// Membership peers are the other Nodes where a pod of the agent's DaemonSet (--daemonset) is
// scheduled (peers.go), not the Nodes matching the DaemonSet's nodeSelector and tolerations:
// the DaemonSet controller has already applied those (with affinity and the taints it
// honours), so the agent reads its outcome instead of keeping a second copy of the rule that
// could drift, and a Node the pod cannot run on for any reason (Windows, virtual, outside the
// selector) is never dialled nor presumed alive while settling. The pods are watched in the
// DaemonSet's namespace only (the chart's Role: pods list and watch there), matched by their
// controller reference and stripped to owner, node and phase. Without --daemonset, or when
// listing them is refused, every Node is a peer, as before.
//
// # Syncs
//
// Informer events only record which Services changed and add the single key "sync" to a
// client-go rate-limiting workqueue, so bursts coalesce; a golang.org/x/time/rate limiter holds
// syncs to one per --min-sync-period. A change of the membership view marks the Services with
// endpoints on the nodes whose liveness changed and queues a sync that skips the limiter:
// failover time counts, and such changes are rare. That sync is partial (announcers recompute
// every VIP on every sync), so a failover does not wait for a full sync's rewrite. A full sync runs at start, after any failure, when the
// Node's addresses or zone change, and every --sync-period, which repairs drift in the kernel
// (a flushed or edited chain, a deleted jump; see package rules for what a full sync writes; at
// 10,000 Services it costs one iptables-save, about 1.5 s here, when nothing drifted); the
// metric portico_agent_sync_proxy_rules_chains_restored_total{sync="full"} counts what it
// wrote. Exiting never flushes rules, so established connections survive a restart; on SIGTERM
// the agent also keeps its node in the other agents' membership views for
// --membership-restart-hold instead of leaving (membership.Restart; agent.go's exitHoldFor says
// when it does not), so that the VIPs it announces do not move while it restarts.
//
// # IP families
//
// The families programmed follow the Node's InternalIP and ExternalIP addresses without a
// restart (families.go): at start those of the Node as cached (IPv4 while it is unknown or has
// no address), then, on every full sync (every change of the Node's addresses is one), a family
// the Node gained is programmed at once and a family it lost is removed (nftables: its table
// deleted; iptables: its PTC- chains and jumps) only when the Node still lists addresses, none
// of that family, and no pod on the node has an endpoint of it. A Node update listing no
// address at all changes nothing, and a family some pod here still uses keeps its rules until
// the first full sync after its last local endpoint went: a transient status update does not
// tear down a family that serves traffic. The health-check servers count the local endpoints
// of the families programmed; /healthz forgets a removed family. A family that cannot be
// added (iptables mode without ip6tables) is logged, and retried on every full sync.
//
// Each proxier observes portico_agent_network_programming_duration_seconds (kube-proxy's network
// programming latency) per family once that family's rules are programmed, from the trigger
// times the tracker took with the changes (tracker.Trigger, State.Triggers); a failed sync's
// are dropped, as kube-proxy does.
//
// The measurements kube-proxy makes are exported under kube-proxy's names too
// (KubeProxyMetricNames: sync durations, last sync and queued times, network programming
// latency, Service and EndpointSlice change counts), beside the portico_agent_ ones, so that
// kube-proxy's dashboards keep working after the switch.
//
// After a sync, UDP conntrack entries whose original destination is a changed UDP service
// address or NodePort and whose reply source is not a serving endpoint are deleted over netlink
// in one pass: entries of removed endpoints, and entries created while the port had no endpoint.
//
// # Health
//
// The healthCheckNodePorts, /healthz and /livez are package healthcheck's; see its doc.
//
// # Source ranges
//
// loadBalancerSourceRanges are package servicerules': spec.loadBalancerSourceRanges, else
// the service.beta.kubernetes.io/load-balancer-source-ranges annotation. When they are invalid
// (the controller reports the Service as InvalidSpec and keeps its load balancer), the agent
// drops every new connection to the Service's LoadBalancer IPs, from any source, until the value
// is fixed: enforcing the valid items alone, or nothing, would open traffic the user meant to
// restrict. ClusterIP, externalIPs and NodePorts are not restricted by source ranges.
//
// # externalIPs
//
// Whoever may create a Service may list any address in spec.externalIPs, and kube-proxy
// programs it on every node: another Service's VIP:port, or a host outside the cluster, is
// then taken (CVE-2020-8554). --external-ip-policy (config externalIPs.policy, chart
// agent.externalIPs.policy) keeps kube-proxy's allow by default; deny programs none, and cidrs
// only the addresses within --external-ip-allowed-cidrs. Package serviceports applies it, so
// both proxy modes leave a refused address without any rule: its packets are not DNATed (the
// ClusterIP, NodePorts and the allowed addresses of the same Service are served as before).
// The Service gets a Warning Event ExternalIPsRefused naming the refused addresses and the
// setting. Every agent refuses the same addresses, so the Event is named after the Service's
// UID and its note: the first agent's Create makes it, the others' get AlreadyExists, and the
// Service shows one Event however many nodes there are (externalips.go says why not the
// events library's correlator, which folds repeats within one process only).
//
// # Limits
//
// No localhost NodePorts (route_localnet; kube-proxy's nftables mode has none either). See
// package rules for the limits of the rule layout.
package nodeproxy
