// Package migration is the end-to-end suite of moving a cluster from MetalLB to Portico.
//
// TestMigrateFromMetalLBKeepsEveryAddress: the real MetalLB controller (e2e/framework/metallb
// builds it from the Go module proxy) allocates addresses for a workload of LoadBalancer
// Services on a real dual-stack control plane (e2e/framework/cluster: etcd, kube-apiserver,
// kube-controller-manager), with MetalLB's CRDs from its module and Portico's from deploy/crds;
// then MetalLB stops, `portico-controller migrate metallb` converts its configuration, and
// portico-controller (baremetal) takes the Services over. It proves that every Service keeps
// exactly its addresses (a watch sees no status.loadBalancer change across the switch) and that
// the converter writes nothing from a bad input. It removes what it made, so that it runs again
// on the shared control plane (-count=2).
//
// TestSwitchUnderTraffic: the switch of docs/migrate-metallb.md on a cluster of real kubelets
// (e2e/framework/nodes) that runs as MetalLB users run it: kube-proxy on every node, MetalLB's
// controller, and its speaker on every node (in the node's network namespace, as its
// hostNetwork pod runs) announcing a layer-2 pool by ARP and a BGP pool to a bird2 router
// (native BGP). Echo pods serve five Services; a client on the LAN and one behind the router
// hold connections and open new ones to every VIP while MetalLB's controller stops, the
// command converts, the chart installs Portico (e2e/framework/install), MetalLB's speakers stop
// node by node and kube-proxy goes (kube-proxy --cleanup). It proves that no Service's status
// changes and that requests on new connections fail for no longer than one layer-2 failover,
// and logs the failed requests, the longest failed window, the held connections reset, the
// client's neighbour entries and each step's time.
//
// TestSwitchKeepingKubeProxy: the same switch by the doc's default path: the chart installs
// Portico's agents announce-only (agent.mode none) and kube-proxy stays; the same bounds.
//
// It needs `make tools`, root and the packages of e2e/framework/nodes and bird2, and builds
// MetalLB on first use (minutes, cold).
package migration
