// Package servicerules owns the Service rules that portico-controller, portico-ccm and
// portico-agent all apply, so that each rule has one owner (house style rule 12) and the three
// binaries cannot drift apart:
//
//   - node eligibility: NodeEligible, NodeBeingDeleted and NodeAddresses (the
//     exclude-from-external-load-balancers label, the ToBeDeletedByClusterAutoscaler taint,
//     deletion, which address a load balancer reaches a node on);
//   - SourceRanges: spec.loadBalancerSourceRanges wins over the
//     service.beta.kubernetes.io/load-balancer-source-ranges annotation, and an invalid value
//     makes the whole rule invalid (the controller reports it, the agent denies every source);
//   - AffinityTimeout: the ClientIP session affinity timeout and its default.
//
// It is part of Portico's ground floor: every function is pure, and it imports only k8s.io/api,
// apimachinery and annotations: never a client, a controller, a provider or the agent, so each
// binary links these rules without linking what the others run. The controller's model of a
// load balancer (controllers/servicemodel) and the agent's Service ports (nodeproxy/serviceports)
// are built on it.
package servicerules
