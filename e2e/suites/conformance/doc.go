// Package conformance runs the fast subset of the upstream Kubernetes e2e specs
// (e2e/framework/conformance's Fast selection: the [Conformance] Services specs and the
// LoadBalancers specs that are not [Slow]) against Portico as a user installs it, on a cluster
// of real kubelets: every spec must pass. `make conformance` runs the whole selection in
// every column (Portico, kube-proxy iptables, kube-proxy nftables) and writes the table.
//
// Needs root, `make prereqs` and `make tools`; the first run builds e2e.test, ginkgo, kubectl
// and agnhost from the Go module proxy (about 20 minutes on two loaded cores, cached after).
package conformance
