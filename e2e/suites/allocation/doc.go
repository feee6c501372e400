// Package allocation is the end-to-end suite of bare-metal address allocation: the real
// portico-controller manager (leader election, the Service reconciler, the AddressPool status
// reconciler) with the baremetal provider, against a real dual-stack kube-apiserver started by
// e2e/framework/cluster with the AddressPool CRD from deploy/crds installed. It checks what users see:
// status.loadBalancer, conditions, Events and pool status.
package allocation
