// Package servicemodel owns the pure rules that turn a Service into what portico-controller
// (controllers/service) and portico-ccm (controllers/ccm) ask a provider for:
//
//   - BuildLoadBalancer: Service + Nodes -> the complete desired providers.LoadBalancer, or every
//     problem with its field path (ports, requested IPs, IP families, capabilities);
//   - EligibleNodes: the load-balancer backends;
//   - ToServiceStatus: a provider's Status -> status.loadBalancer.
//
// The rules the agent applies too (node eligibility, source ranges, the affinity timeout) live
// on the ground floor, in package servicerules, which this package builds on; portico-agent
// does not link this package.
//
// It is a leaf: it imports k8s.io/api, apimachinery, annotations, servicerules and providers
// only, never a client or controller-runtime, and every function is pure, so each rule is
// table-tested here.
package servicemodel
