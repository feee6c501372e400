// Package dataplane is the end-to-end suite of portico-agent: real packets through real iptables
// and real nftables. One network lab (e2e/framework/netlab: eight nodes, two clients and a
// router in network namespaces, dual stack, lab addresses only) and one real control plane
// (e2e/framework/cluster: etcd, kube-apiserver, kube-controller-manager) serve every test; most
// tests run once per proxy mode (forModes): node1 and node2 run the portico-agent binary built
// by the suite with --proxy-mode=iptables, node5 and node6 with --proxy-mode=nftables; node3,
// node4, node7 and node8 are left to tests running their own agent and to the benchmarks
// (portico-agent and kube-proxy, both modes, side by side). Tests create Services, EndpointSlices (through
// the EndpointSlice controller and Pods registered as ready) and status.loadBalancer as a
// controller would, then check what clients and pods see: ClusterIP, NodePort and LoadBalancer
// IP traffic, traffic policies, source ranges (from the spec and from the annotation, and that
// invalid ranges are never half-applied), session affinity, SCTP, IPv6, health checks,
// /healthz, drift repair, restarts and --cleanup; that every kind of Service is created, changed
// and deleted without a failed sync; and that the same probes get the same answers through
// portico-agent and through kube-proxy of the same mode (run on node3 or node7).
//
// It needs root, iptables and nft; it runs with `go test ./e2e/suites/dataplane/` (see harness_test.go).
package dataplane
