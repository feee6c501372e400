// Package dataplane is the end-to-end suite of portico-agent: real packets through real iptables.
// One network lab (e2e/framework/netlab: four nodes, two clients and a router in network namespaces,
// dual stack, lab addresses only) and one real control plane (e2e/framework/cluster: etcd,
// kube-apiserver, kube-controller-manager) serve every test; node1 and node2 run the
// portico-agent binary built by the suite, node3 and node4 are left to the benchmarks
// (portico-agent and kube-proxy side by side). Tests create Services, EndpointSlices (through
// the EndpointSlice controller and Pods registered as ready) and status.loadBalancer as a
// controller would, then check what clients and pods see: ClusterIP, NodePort and LoadBalancer
// IP traffic, traffic policies, source ranges (from the spec and from the annotation, and that
// invalid ranges are never half-applied), session affinity, SCTP, IPv6, health checks,
// /healthz, drift repair, restarts and --cleanup.
//
// It needs root and iptables; it runs with `go test ./e2e/suites/dataplane/` (see harness_test.go).
package dataplane
