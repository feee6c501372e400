// Package nodes proves the cluster of real kubelets (e2e/framework/nodes): three nodes, each
// with its own network, mount and UTS namespace, containerd and kubelet, become Ready; a
// Deployment of echo server pods (real containers from an image imported without a registry)
// becomes Ready with a pod on every node; each pod answers another node by its pod IP, and a
// pod on one node reaches a pod on another (exec'd, the client's pod IP kept); CoreDNS (a pod
// that reaches the apiserver) answers for Services; exec and logs work through the apiserver;
// and Close leaves no process, cgroup, mount, namespace or link. It logs the cluster's start
// time, pod create-to-Ready times and the cluster's memory.
//
// It needs root, `make tools` (kubelet, kube-scheduler, CoreDNS and the control plane) and the
// Debian packages containerd, runc and containernetworking-plugins (`make prereqs`).
package nodes
