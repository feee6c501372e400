// Package nodes runs a local Kubernetes cluster whose nodes are real kubelets, for the suites
// that must see Portico as a user installs it (e2e/suites/nodes first). Everything runs on this
// machine without Docker and without a registry.
//
// # Layout
//
// A cluster takes a network-lab slot (e2e/framework/netlab) with N node namespaces and the
// root link, and puts on it:
//
//   - the control plane of e2e/framework/cluster on the root link's address: etcd;
//     kube-apiserver with Node,RBAC authorization and NodeRestriction, one bearer token per
//     kubelet (user system:node:NAME, group system:nodes), a client certificate for kubelets
//     (exec, logs), InternalIP as the kubelet address; kube-controller-manager with every
//     default controller ('*') and the service-account key and root CA; kube-scheduler;
//   - per node: a holder process in the node's network namespace that owns the node's own
//     mount namespace (per-node directories mounted over /var/lib, /var/log and /run) and UTS
//     namespace (hostname nodeI); containerd (Debian's 1.6, runc, CNI ptp + host-local +
//     portmap on the lab's pod CIDR of the node) and kubelet (built from the module proxy by
//     e2e/framework/k8sbin) entered into the three namespaces with nsenter; all three and every
//     container inside the cgroup <state dir name>/nodeI of every hierarchy (kubelet's
//     cgroupRoot, cgroupfs driver; checked on cgroup v1 with the unified hierarchy beside it,
//     as these machines run; a cgroup v2-only host would need controllers enabled in each
//     level's cgroup.subtree_control, which this package does not do);
//   - routes: each node's pod CIDR via the node in this namespace (pods reach the apiserver)
//     and the Service CIDR via the root address in each node; the lab already routes every
//     node's pod CIDR via that node in the other nodes;
//   - images, built here with go-containerregistry from static Go programs and imported into
//     each node's containerd with `ctr images import`: the pause image (e2e/tools/pause), the
//     echo server (e2e/tools/echoserver, Cluster.EchoImage) and, with Options.DNS, CoreDNS.
//     Pods must use ImagePullPolicy Never or IfNotPresent: nothing can be pulled, except
//     from a registry the test runs and Cluster.TrustRegistry makes every node's containerd
//     trust (a hosts.toml in its registry config_path, plain HTTP);
//   - with Options.DNS, CoreDNS as a Deployment in kube-system behind the kube-dns Service
//     (DNSServiceIP, the kubelets' clusterDNS), reaching the apiserver at its real address.
//
// # Nodes added later
//
// Options.Spare reserves lab nodes at Start (addresses, pod CIDRs the LAN already routes,
// kubelet tokens); Cluster.AddNode starts the next one as a node joining the running cluster
// (its routes, containerd with the cluster's images and any given archives, its kubelet),
// e.g. to see what a DaemonSet does on a node added after its install. An added node is one of
// Nodes from then on and is stopped and cleaned up like the others.
//
// # Reboot
//
// Cluster.Reboot turns a node off and on as a machine reboots: every process of the node
// killed (kubelet, containerd, shims, containers, the holder: its mounts and the pods' network
// namespaces go with it), its netfilter ruleset and conntrack table flushed, /run and
// containerd's state cleared (tmpfs on a real node); its network configuration and /var/lib
// (images, the kubelet's root) stay; then the holder, containerd and the kubelet start again
// and the kubelet restarts the node's pods in new sandboxes.
//
// # Dual-stack
//
// Options.IPFamilies makes the cluster dual-stack, IPv4 first (DualStack) or IPv6 first
// (DualStackIPv6, where e2e.test runs its specs over IPv6): the lab gets its IPv6 plan
// (fd00:c613:N::/48) and the root link the LAN's ::254; the apiserver listens on the primary
// family's root address (the kubernetes Service's endpoint must be of its family) with both
// Service CIDRs (cluster.ServiceCIDR, cluster.ServiceCIDR6), primary first; every kubelet gets
// both node IPs (--node-ip, primary first: pod IPs and InternalIPs follow that order), every
// Node both lab pod CIDRs (set here, as for IPv4, rather than by kube-controller-manager's
// allocator: the lab routes each node's own ranges), the CNI both ranges with a default route
// per family; the routes above exist per family; kube-dns is in the primary family
// (DNSServiceIP6 for IPv6) and CoreDNS answers A and AAAA. IPv6-only is not offered: the lab
// always carries IPv4.
//
// Not there: kube-proxy or any service proxy, so ClusterIPs (kube-dns's too) lead nowhere until
// Portico's agent runs as one; ask CoreDNS at its pod IP (Cluster.DNSPod) meanwhile.
//
// # Ownership and cleanup
//
// A cluster's state lives in $TMPDIR/portico-nodes-<owner pid>-<random>; the same name is its
// cgroup in every hierarchy. Close kills each node's kubelet and containerd, then every process
// left in the node's cgroup subtree (shims, containers, the holder), removes the cgroups, stops
// the control plane, closes the lab (namespaces, root link and the routes through it) and
// removes the state directory; the nodes' mounts and the pods' network namespaces vanish with
// the nodes' mount namespaces. The daemons die with their owner (Pdeathsig); what a killed
// owner leaves (shims and containers, cgroups, state) is removed by Sweep, which Start runs
// first and `make clean-lab` runs too, after which netlab.Sweep removes the lab. Leftovers
// lists what remains of a closed cluster, for tests to assert it is nothing.
//
// Clusters need root, the Debian packages containerd, runc and containernetworking-plugins,
// util-linux and iproute2 (internal/prereq); New fails naming the fix, or skips when
// PORTICO_SKIP_PRIVILEGED=1 allows it.
package nodes
