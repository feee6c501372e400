// Package ccm is the end-to-end suite of portico-ccm: it builds the binary, runs it against a
// real etcd + kube-apiserver (e2e/framework/cluster) with the reference provider behind the stock service
// controller, and checks what users see: ingress, the stock finalizer, Events, deletion, and
// that Services with a loadBalancerClass are left alone (ccm_test.go). rbac_test.go applies
// deploy/ccm and runs portico-ccm with the Deployment's flags (--use-service-account-credentials)
// as its ServiceAccount, with the AWS provider against moto (e2e/framework/moto), so that a rule missing
// from the manifest fails the test.
package ccm
