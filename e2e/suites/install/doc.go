// Package install is the end-to-end suite of Portico installed as a user installs it: a
// cluster of real kubelets (e2e/framework/nodes: control plane, three nodes with containerd,
// CoreDNS, no kube-proxy or any other service proxy) and `helm install` of the chart
// deploy/chart/portico with Portico's images built here and imported on every node
// (e2e/framework/install). It proves that the agent DaemonSet's pods program every node
// (ClusterIPs work from nodes and pods: CoreDNS answers through the kube-dns ClusterIP), that
// the controller Deployment provisions a VIP from an AddressPool for a LoadBalancer Service in
// front of a Deployment of echo pods, that a client on the nodes' LAN reaches the VIP (L2
// announcement), that `helm upgrade` to new images under continuous traffic keeps the VIP and
// fails no request, and that deleting the Service and `helm uninstall` leave no rule, table,
// announcement or object of Portico behind. It logs the cluster's start time, the time from
// install to the first request served through the VIP, and the whole cluster's memory.
// TestInstallFromRegistry takes a real rollout's path instead: the images and the chart pushed
// (internal/publish, what `make push` runs) to a registry on the nodes' LAN that every node's
// containerd trusts (hosts.toml), the chart installed from oci:// and the images pulled by the
// kubelets, nothing imported.
//
// It needs root, the Debian packages of e2e/framework/nodes (containerd, runc, the CNI
// plugins) and of internal/images (apt-get download of iptables and conntrack), and the
// Kubernetes binaries (`make tools`).
package install
