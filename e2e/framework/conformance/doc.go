// Package conformance runs the Kubernetes project's own e2e specs for Services and
// LoadBalancers (k8s.io/kubernetes/test/e2e at the cluster's version) against a cluster of
// real kubelets (e2e/framework/nodes), once per service proxy: Portico's agent, kube-proxy's
// iptables mode and its nftables mode, and kube-proxy with Portico's agent as the announcer
// only (agent.mode none) on the LoadBalancers specs, and puts the outcomes side by side.
//
//   - Build: e2e.test (go test -c), the ginkgo CLI of the same module graph, kubectl (the
//     specs exec into pods with it) and agnhost, from the Go module proxy through
//     e2e/framework/k8sbin's wrapper-module cache;
//   - BuildImages: the images the specs run, named as the specs name them so that nothing
//     is pulled (agnhost 2.63.0 with bash as /bin/sh, netcat-openbsd, curl, GNU wget, ss and
//     busybox's applets; busybox), and a kube-proxy image (the cached kube-proxy binary,
//     iptables and nft from Debian's packages);
//   - InstallKubeProxy: kube-proxy as a DaemonSet in iptables or nftables mode;
//   - NewTester: the network namespace e2e.test runs in, behind the lab's router, with a
//     source address outside the nodes' /16 (the source-IP specs count the nodes' /16 as
//     masqueraded) and routes to the nodes, the pods and the LoadBalancer Pool;
//   - Run: ginkgo with parallel processes and e2e.test (--provider=local) in that namespace,
//     its JSON report read into Specs;
//   - RunColumn: a fresh cluster per column, the proxy installed, the selection run;
//   - Table: the Markdown results table, WriteBetweenMarkers puts it into docs/conformance.md
//     between the markers of its kind (ByTable: IPv4, IPv6, announce-only).
//
// SkipList is the skip list, one reason per entry; docs/conformance.md lists it.
package conformance
