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
//
// Each test failed on the code the issue was filed against (see its comment).
package operations
