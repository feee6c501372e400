// Package operations holds the day-two suite: each test makes an event an operator meets after
// the install (a configuration edit, a restart, a reboot, a second instance, a denied request)
// happen to the real parts (a real kube-apiserver, kubelets where a node matters, moto for AWS,
// real netfilter in network namespaces) and proves that it destroys no load balancer,
// duplicates no address and blackholes no node.
//
// Fault -> expected outcome (issue 31; the item number in brackets):
//
//	| fault                                              | expected outcome                                   | test |
//	|----------------------------------------------------|----------------------------------------------------|------|
//	| [1] controller restarted with a class removed from  | the Service keeps its load balancer (no provider   | TestOwnersConfigEditKeepsLoadBalancer |
//	|     its configuration                              | Delete), address and finalizer; condition and      |      |
//	|                                                    | Warning Event ClassNotServed name the class, the   |      |
//	|                                                    | instance and what it serves; re-adding resumes it  |      |
//	| [1] the same edit, AWS provider (moto), an NLB      | the NLB stays in AWS under the same DNS name,      | TestOwnersConfigEditKeepsNLB |
//	|                                                    | which the Service still reports                    |      |
//	| [1] two installations with different classes; one  | each provisions and holds its own Services; the    | TestOwnersTwoInstances |
//	|     reconfigured (class removed, the other's added),| other's keep finalizer, holder, status, no Delete; |      |
//	|     the other restarted                            | a pre-upgrade Service is adopted by its class's    |      |
//	|                                                    | installation; a stock-finalizer Service untouched  |      |
//	| [1] `portico-controller orphans`, then `--delete`   | lists the Services the instance holds and does not | TestOwnersOrphansCommand |
//	|                                                    | serve, deletes nothing; --delete deletes only      |      |
//	|                                                    | those (never another's or an unrecorded one)       |      |
//	| [1] Service deleted or changed to ClusterIP, served | load balancer deleted (4 Delete calls), finalizer, | TestOwnersDeleteAndTypeChangeStillDelete |
//	|     or held with its class removed                 | holder and status removed                          |      |
//	| [2] SIGTERM, agent's Role deleted (read gets 403)  | restart: rules stay, decision and reason logged    | TestAgentExitDecision |
//	| [2] SIGTERM, agent's token invalid (read gets 401) | restart: rules stay, decision and reason logged    | TestAgentExitDecision |
//	| [2] SIGTERM, agent's DaemonSet deleted (NotFound)  | uninstall: agent's nftables table removed          | TestAgentExitDecision |
//	| [2] helm uninstall order: DaemonSet, then RBAC, SA | uninstall (seen by the watch): table removed       | TestAgentExitDecision |
//	| [3] any flag given with --config (file may set it) | the flag's value wins, the file's other keys stay  | config.TestEveryFlagOverConfigFile (unit) |
//	| [4] a pool address already in the status of a      | a Portico Service gets another address; asking for | TestPoolsForeignAddressReserved |
//	|     Service of another class, or of none (another  |     the held one is refused (InvalidSpec naming    |      |
//	|     implementation, a second allocator, anyone     |     the holder); the chart refuses two bare-metal  |      |
//	|     with services/status), before or after start   |     allocators and replicas without leader         |      |
//	|                                                    |     election (go test ./deploy/)                   |      |
//	| [4] the same with portico-ccm (baremetal, class-   | the class-less Service gets another address        | TestPoolsForeignAddressReservedByCCM |
//	|     less) while another class's Service holds one  |                                                    |      |
//	| [5] a Service of a class Portico does not serve    | no agent answers ARP for it (BGP advertises from  | TestAnnounceForeignClassNotAnswered |
//	|     with a pool address forged into its status     |     the same targets: announce.TestTargetsOnly-    |      |
//	|                                                    |     PorticoClasses); a Portico VIP is answered by  |      |
//	|                                                    |     exactly one node                               |      |
//	| [6] a tenant's Service lists another's VIP, or any  | with policy deny no node programs its externalIPs  | TestExternalIPPolicy (nftables and iptables); unit: serviceports TestExternalIPPolicy, nodeproxy TestExternalIPsRefusedEventOncePerService, config TestAgentExternalIPPolicy, deploy TestAgentExternalIPs |
//	|     address, in spec.externalIPs (CVE-2020-8554);  | (no rule, packets not answered by the backend);    |      |
//	|     agents under agent.externalIPs allow, deny,    | with cidrs only those inside; allow serves all (the |      |
//	|     cidrs                                          | default); one Warning Event ExternalIPsRefused from |      |
//	|                                                    | two agents names the addresses and the setting; a  |      |
//	|                                                    | bad value stops the agent / fails the chart schema |      |
//	|                                                    | naming the flag / value path                       |      |
//	| [7] a node reboots on a cluster without kube-proxy | the chart refuses agent.apiServer "" with the agent | TestRebootWithoutKubeProxy; deploy: TestSchemaRefusesBadValues; config: TestAgentRefusesOwnClusterIP (unit); framework/nodes: TestReboot |
//	|     (kubelet, containerd, agent, containers killed, | (naming the value and how to set it), and the agent |      |
//	|     rules and conntrack flushed, /run cleared, then | refuses the kubernetes ClusterIP as its API server; |      |
//	|     started again); the agent given the ClusterIP   | installed with the API server's address, the node  |      |
//	|     (the chart's default agent.apiServer "")        | serves its ClusterIP and NodePort again and its    |      |
//	|                                                    | agent is Ready in a new container                  |      |
//	| [8] the agent starts while its Node lists only an  | without a restart, in both proxy modes, the agent  | TestFamiliesFollowNode (nftables, iptables); nodeproxy: TestFollowNodeFamilies, TestNextFamilies; nodeproxy/netfilter: TestSetFamilies (unit); nodeproxy/nftables (-tags e2e): TestSetFamilies |
//	|     IPv4 InternalIP; the Node then gains its IPv6  | programs IPv6 (about 1 s after the update): a       |      |
//	|     address (a dual-stack Local LB Service with a  | client reaches the pod at the IPv6 ClusterIP and    |      |
//	|     pod on the node)                               | NodePort, the health check counts both addresses;   |      |
//	|                                                    | a family goes only when the Node has none of it and |      |
//	|                                                    | no local pod uses it                                |      |
//	| [9] the IAM policy grants every action on "*"       | one policy file (the chart ships it byte for byte);  | providers/aws (-tags moto): TestIAMPolicyConditionsMoto; TestIAMPolicyScoped, TestChartIAMPolicyIsTheOne, TestIAMPolicy; deploy: TestChartIAMPolicyIsDeployAWS |
//	|     unconditioned; the chart's copy differs         | creates need the cluster tag in the request,       |      |
//	|                                                    | changes a resource carrying it, deletes it = owned, |      |
//	|                                                    | ec2:CreateTags only with CreateSecurityGroup; every |      |
//	|                                                    | call of an NLB + Classic ELB lifecycle is allowed   |      |
//	| [10] NLB with backend-protocol: ssl (TLS target    | provisioned: each target group gets only the        | providers/aws (-tags moto): TestNLBTargetGroupProtocolsMoto (TCP, UDP, TCP_UDP, TLS); e2e/suites/aws: TestNLBBackendSSL (through portico-controller) |
//	|      group): stickiness default refused by AWS     | attributes its protocol takes; a Service's key that |      |
//	|                                                    | one does not take warns                             |      |
//	| [10] an Ensure refused half-way                    | the half-made NLB is converged by the next Ensure   | providers/aws (-tags moto): TestNLBFailedProvisioningDeletedMoto |
//	|                                                    | and removed, with its groups, by Delete             |      |
//	| [11] the same packet probes sent through portico-agent and through kube-proxy v1.36.3, per proxy mode (source ranges, traffic policies without local endpoints, no endpoints, NodePorts, externalIPs) | each mode answers every probe as kube-proxy's mode of the same name: served (source kept or not), refused, dropped | e2e/suites/dataplane TestProbesMatchKubeProxy (iptables, nftables) |
//	| [12] every kind of Service (traffic policies, affinity, source ranges, NodePort, LoadBalancer, externalIPs, healthCheckNodePort) created, changed and deleted | every partial sync commits: no failed transaction, no full sync in its place (portico_agent_sync_proxy_rules_full_fallbacks_total stays put) | e2e/suites/dataplane TestServiceChurnWithoutFullSyncFallback (both modes); nodeproxy/nftables TestPartialSyncsOfEveryKind |
//	| [13] a conformance run whose BeforeSuite fails, | the run is incomplete: the fast subset's test fails, | e2e/framework/conformance: TestIncomplete, TestNotApplicableL2; e2e/suites/conformance: TestPorticoPassesFastSelection |
//	|      whose specs never run, or ginkgo fails alone; | make conformance exits non-zero, the table says so  |      |
//	|      a spec that passes in L2 only by a VIP move   | (counts pinned: fast 21, full 66/17/87/16); the    |      |
//	|                                                    | L2 column shows the spec n/a with its reason       |      |
//	| [13] the rules programmer fails in a sync that brings a new VIP (a user's rule jumping to an agent chain, in iptables mode; before item 12's fix, a Local Service's deletion in nftables mode) | no node announces the VIP while its rules lack it (the elected node logs that it holds it back), and withdrawals go on; once a sync programs the rules exactly one node answers ARP, with the VIP in its rules | TestRulesFailedAnnounceNothingNew; nodeproxy: TestSyncLoopRulesFailedReachesAnnouncers; announce/l2, announce/bgp: TestConsumerAddsNothingWhileRulesFail; e2e/suites/bgp: TestBGPFailover (after TestBGPAnnounce: every one of 30 requests answered once the router has every next hop) |
//	| [13] the switch from MetalLB (kube-proxy, L2 and BGP speakers) to the chart's Portico under traffic | held connections are reset only where their flow's path changed: none on a layer-2 VIP whose announcing node (the client's neighbour entry) did not move, at most one per held connection and move when it did; on the BGP VIP only while a node's path is out of the router or coming back, at most one per held connection and path change | e2e/suites/migration: TestSwitchUnderTraffic |
//	| [29.5] the API server out of reach of a running    | /readyz fails naming the apiserver check; ready     | TestControllerNotReadyWithoutAPIServer |
//	|      portico-controller (its caches synced)          | again once it answers                              |      |
//	| [29.5] the controller's Deployment deleted (helm   | the garbage collector deletes the leader-election   | TestControllerLeaseGoneWithDeployment; e2e/suites/install TestInstall (no Lease left) |
//	|      uninstall); a Lease left ownerless by an older | Lease (owned by the Deployment); the older Lease    |      |
//	|      version                                       | gets the owner at the next start                   |      |
//	| [29.4] kube-proxy's dashboards pointed at the       | the agent exports kube-proxy's names beside its    | TestKubeProxyMetricNames; nodeproxy: TestKubeProxyMetricNames (unit, buckets) |
//	|      agents; a Service and a ready Pod created     | own, each present from the first sync; after the  |      |
//	|                                                    | change the sync histogram, last sync and queued    |      |
//	|                                                    | times, Service and EndpointSlice change counters   |      |
//	|                                                    | and network programming histogram all move, each   |      |
//	|                                                    | twin counting what the agent's own name counts     |      |
//	| [29.4] monitoring values: PodMonitor over a        | refused naming agent.metricsBindAddress; enabled   | deploy: TestMonitors, TestPrometheusRuleMetricsExist, TestPodKnobs, TestRecommendedLabels |
//	|      loopback /metrics, an alert on a renamed      | monitors select the pods/Service and port they     |      |
//	|      metric, the common pod knobs                  | scrape; every alert reads a metric the code builds;|      |
//	|                                                    | the knobs reach the pods; recommended labels on    |      |
//	|                                                    | every object                                       |      |
//	| [29.4] an AddressPool or BGPPeer with a bad value  | the API server refuses it, naming the field (CEL    | TestCRDValidation, TestCRDValidationAcceptsRepoObjects |
//	|      (999.1.1.1/99, /33, host bits, a reversed or   | rules, patterns); IPv6, ranges, 4-byte ASNs and     |      |
//	|      mixed range, ASN 23456, hold time 2s, ...)     | every object the repository shows are accepted      |      |
//	| [29.4] Portico upgraded over an older release's     | helm upgrade leaves crds/ alone; the documented     | TestCRDUpgradeCommand |
//	|      CRDs (installed by helm install, Helm 4)       | `kubectl apply --server-side --force-conflicts`     |      |
//	|                                                    | replaces them (a conflict without the flag); bad    |      |
//	|                                                    | objects stored before stay, editable otherwise      |      |
//
// Each test failed on the code the issue was filed against (see its comment).
package operations
