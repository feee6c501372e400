// Package v1alpha1 holds Portico's custom resources in the portico-lb.io API group, both
// cluster-scoped: AddressPool, the pools of load-balancer addresses the bare-metal provider hands
// out and how the agents announce them (layer 2, BGP), and BGPPeer, a router the agents peer
// with, whose status each node's agent reports.
//
// The CRD manifests in deploy/crds and zz_generated.deepcopy.go are generated from these types
// by controller-gen (make generate); a test fails when they are out of date.
//
// +kubebuilder:object:generate=true
// +groupName=portico-lb.io
package v1alpha1
