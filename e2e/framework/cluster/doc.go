// Package cluster runs a real Kubernetes control plane for tests: etcd, kube-apiserver and
// kube-controller-manager (EndpointSlice, ServiceAccount and namespace controllers by default),
// built by package k8sbin, on free ports with credentials generated per cluster (a CA and
// serving certificate, a service-account key pair, a static admin token).
//
// There is no kubelet and no scheduler: the helpers in kubelet.go register Nodes and mark Pods
// Running and Ready with given IPs, so the real controllers produce real EndpointSlices.
//
// Every process runs in its own process group with Pdeathsig=SIGKILL; Stop terminates them and
// removes the temporary directory, and StartForTest registers Stop with t.Cleanup.
package cluster
