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
//	| [11] the same packet probes sent through portico-agent and through kube-proxy v1.36.3, per proxy mode (source ranges, traffic policies without local endpoints, no endpoints, NodePorts, externalIPs) | each mode answers every probe as kube-proxy's mode of the same name: served (source kept or not), refused, dropped | e2e/suites/dataplane TestProbesMatchKubeProxy (iptables, nftables) |
//	| [12] every kind of Service (traffic policies, affinity, source ranges, NodePort, LoadBalancer, externalIPs, healthCheckNodePort) created, changed and deleted | every partial sync commits: no failed transaction, no full sync in its place (portico_agent_sync_proxy_rules_full_fallbacks_total stays put) | e2e/suites/dataplane TestServiceChurnWithoutFullSyncFallback (both modes); nodeproxy/nftables TestPartialSyncsOfEveryKind |
//
// Each test failed on the code the issue was filed against (see its comment).
package operations
