// Package announceonly is the end-to-end suite of portico-agent beside kube-proxy (issue 29):
// the real control plane (e2e/framework/labcluster) with the AddressPool CRD, the real
// portico-controller with the baremetal provider allocating from a pool with
// spec.announce.l2, kube-proxy v1.36 (e2e/framework/k8sbin) and portico-agent in the same
// node namespaces of a network lab, three nodes and one client on their segment.
//
// TestAnnounceBesideKubeProxy runs, for each kube-proxy mode (iptables, nftables), kube-proxy
// and the agent with --proxy-mode=none (announce only: --announce=l2 --membership, the
// default /healthz and /metrics ports, which in that mode are not kube-proxy's) on every node,
// two of them without CAP_NET_ADMIN; the first node ran the agent with a dataplane before, and
// its announce-only agent removes the rules that one left:
// a LoadBalancer Service gets its VIP from the pool, the elected agent alone answers ARP for
// it, and the client reaches the pods through it; an externalTrafficPolicy: Local Service
// whose only endpoint is on the node last in its VIP's election order is announced from that
// node alone and served by that pod, and its healthCheckNodePort is kube-proxy's (no agent
// reports failing to open it). Every packet is translated by kube-proxy's rules: no node holds
// Portico's nftables table or iptables chains.
//
// TestBGPBesideKubeProxy runs, for each kube-proxy mode, kube-proxy and the agent with
// --proxy-mode=none --announce=bgp (without CAP_NET_ADMIN) on every node, and bird2 on the
// client as the nodes' router: a VIP of the BGP pool is routed by ECMP via all three nodes,
// a client behind the router is served through it, and no node holds Portico's rules.
//
// TestDataplaneRefusedBesideKubeProxy starts the agent with a dataplane (nftables and
// iptables, on ports kube-proxy does not hold) on a node where kube-proxy runs in each mode:
// it exits at once with the startup code, naming kube-proxy's table or chain and the setting
// to change (--proxy-mode=none, agent.mode=none); with --ignore-other-proxy it starts.
//
// TestChartRefusesBesideKubeProxy creates the DaemonSet kube-system/kube-proxy (as kubeadm,
// kind and EKS run it) on the real API server: `helm install` (Helm's Go packages) of the
// chart with its default dataplane fails naming kube-proxy and agent.mode=none and creates
// nothing; with agent.mode none it renders (server-side dry run, with the same lookups).
//
// Needs root, iproute2, iptables, nftables, arping, bird2 and the Kubernetes binaries (make tools).
package announceonly
