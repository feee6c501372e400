// Package controllers wires portico-controller: NewManager builds the controller-runtime manager
// (leader election on a Lease, metrics, health probes) and registers the reconcilers of its
// subpackages. The Service reconciler lives in controllers/service.
package controllers
