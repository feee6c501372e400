// Package v1alpha1 holds Portico's custom resources in the portico-lb.io API group: AddressPool,
// the cluster-scoped pools of load-balancer addresses the bare-metal provider hands out.
//
// The CRD manifests in deploy/crds and zz_generated.deepcopy.go are generated from these types
// by controller-gen (make generate); a test fails when they are out of date.
//
// +kubebuilder:object:generate=true
// +groupName=portico-lb.io
package v1alpha1
