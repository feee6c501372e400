// Package servicemodel owns the pure rules that turn a Service into what Portico programs, so
// that portico-controller (controllers/service), portico-ccm (controllers/ccm) and portico-agent
// (nodeproxy) apply each rule from one place:
//
//   - BuildLoadBalancer: Service + Nodes -> the complete desired providers.LoadBalancer, or every
//     problem with its field path (ports, requested IPs, IP families, capabilities);
//   - node eligibility: NodeEligible, NodeBeingDeleted, EligibleNodes, NodeAddresses (the
//     exclude-from-external-load-balancers label, the ToBeDeletedByClusterAutoscaler taint,
//     deletion);
//   - SourceRanges: spec.loadBalancerSourceRanges wins over the
//     service.beta.kubernetes.io/load-balancer-source-ranges annotation, and an invalid value
//     makes the whole rule invalid (the controller reports it, the agent denies every source);
//   - AffinityTimeout: the ClientIP session affinity timeout and its default;
//   - ToServiceStatus: a provider's Status -> status.loadBalancer.
//
// It is a leaf: it imports k8s.io/api, apimachinery, annotations and providers only, never a
// client or controller-runtime, and every function is pure, so each rule is table-tested here.
package servicemodel
