// Package ccm is the end-to-end suite of portico-ccm: it builds the binary, runs it against a
// real etcd + kube-apiserver (e2e/cluster) with the reference provider behind the stock service
// controller, and checks what users see: ingress, the stock finalizer, Events, deletion, and
// that Services with a loadBalancerClass are left alone. The suite lives in ccm_test.go.
package ccm
