// Package migration is the end-to-end suite of moving a cluster from MetalLB to Portico: the
// real MetalLB controller (e2e/framework/metallb builds it from the Go module proxy) allocates
// addresses for a workload of LoadBalancer Services on a real dual-stack control plane
// (e2e/framework/cluster: etcd, kube-apiserver, kube-controller-manager), with MetalLB's CRDs
// from its module and Portico's from deploy/crds; then MetalLB stops, `portico-controller
// migrate metallb` converts its configuration, and portico-controller (baremetal) takes the
// Services over. It proves that every Service keeps exactly its addresses (a watch sees no
// status.loadBalancer change across the switch) and that the converter writes nothing from a
// bad input. It needs `make tools` and builds MetalLB on first use (minutes, cold).
package migration
