// Package v1alpha1 holds Portico's custom resources in the portico-lb.io API group, both
// cluster-scoped: AddressPool, the pools of load-balancer addresses the bare-metal provider hands
// out and how the agents announce them (layer 2, BGP), and BGPPeer, a router the agents peer
// with, whose status each node's agent reports.
//
// The CRD manifests in deploy/crds and zz_generated.deepcopy.go are generated from these types
// by controller-gen (make generate); a test fails when they are out of date.
//
// Validation is the API server's first (OpenAPI patterns and CEL x-kubernetes-validations with
// Kubernetes' IP and CIDR libraries, so the CRDs need Kubernetes 1.31 or newer); what a schema
// cannot see (overlaps, selectors, references to other objects) the controller and the agents
// report as conditions and Events. The CEL rules must stay within the API server's estimated
// cost budget, which rules out the obvious ways to order two addresses (string(ip(x)) and
// split lists have no size bound): the rule that refuses a range whose end is before its start
// looks for the first bit where the two ends differ, one prefix length at a time from a
// literal list of pairs "l/l+1", and requires the start to hold a 0 there. Binding a value
// once ([x].all(v, ...)) keeps the estimate down. e2e/suites/operations TestCRDValidation runs
// every rule on a real kube-apiserver.
//
// +kubebuilder:object:generate=true
// +groupName=portico-lb.io
package v1alpha1
