// Package k8sbin builds the pinned Kubernetes binaries (kube-apiserver, kube-controller-manager,
// kube-scheduler, kube-proxy, and kubelet for e2e/framework/nodes), etcd and CoreDNS
// (EnsureCoreDNS) from the Go module proxy into a cache directory outside the repository, and
// reuses them once built.
//
// k8s.io/kubernetes and go.etcd.io/etcd/server/v3 cannot be `go install`ed because their go.mod
// files replace sibling modules with local directories. Ensure writes a small wrapper module per
// upstream module that points each such replace at the published module of the same path, then
// runs `go build` with the version stamped through -ldflags (clients refuse the default
// "v0.0.0-master" version). EnsureModule does the same for any other module (e2e/framework/cpaws
// builds cloud-provider-aws with it), with Module.Pins for a dependency whose upstream
// replacement the proxy does not serve. A build holds a lock file in the cache; finding every
// binary already built takes no lock.
package k8sbin
