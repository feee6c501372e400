// Package controller holds the end-to-end suite of portico-controller: each test runs the real
// manager (leader election, informers, the Service reconciler) against a real kube-apiserver
// started by e2e/framework/cluster, with the reference provider behind it, and checks what a user sees:
// finalizers, status, conditions and Events. BenchmarkProvision1000 measures provisioning
// latency and apiserver writes per Service.
package controller
