// Package controllers wires portico-controller: NewManager builds the controller-runtime manager
// (leader election on a Lease, metrics, health probes) and registers the reconcilers of its
// subpackages.
//
// The rooms under it, all of which drive providers (providers.Provider) from Services:
//
//   - servicemodel: the pure Service -> desired-model rules (BuildLoadBalancer, node
//     eligibility, source ranges, affinity timeout, status conversion), shared with the agent;
//   - service: portico-controller's Service reconciler (finalizer, conditions, Events);
//   - ccm: the k8s.io/cloud-provider adapter that runs the same providers inside portico-ccm.
package controllers
