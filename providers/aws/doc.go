// Package aws is the AWS provider: Classic ELBs (service/elasticloadbalancing) and Network Load
// Balancers (service/elasticloadbalancingv2) on node ports, with the EC2 security groups they
// need: each load balancer's own groups for its source ranges, and one backend group per
// cluster and VPC that every node group lets in (backendsg.go). It owns what it creates through
// tags (tags.go), finds its resources by name and tags rather than by memory, and converges
// every call: observe, compute the desired resources with pure functions (model.go), apply the
// difference one AWS resource per file; a resync with nothing changed, or with only the node
// set changed, skips the full read-back (applied.go, nodeset.go).
package aws
