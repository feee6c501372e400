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
//	| [2] SIGTERM, agent's Role deleted (read gets 403)  | restart: rules stay, decision and reason logged    | TestAgentExitDecision |
//	| [2] SIGTERM, agent's token invalid (read gets 401) | restart: rules stay, decision and reason logged    | TestAgentExitDecision |
//	| [2] SIGTERM, agent's DaemonSet deleted (NotFound)  | uninstall: agent's nftables table removed          | TestAgentExitDecision |
//	| [2] helm uninstall order: DaemonSet, then RBAC, SA | uninstall (seen by the watch): table removed       | TestAgentExitDecision |
//	| [3] any flag given with --config (file may set it) | the flag's value wins, the file's other keys stay  | config.TestEveryFlagOverConfigFile (unit) |
//
// Each test failed on the code the issue was filed against (see its comment).
package operations
