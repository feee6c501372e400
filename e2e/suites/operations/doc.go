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
//
// Each test failed on the code the issue was filed against (see its comment).
package operations
