// Package aws is the AWS provider: Classic ELBs (service/elasticloadbalancing) and Network Load
// Balancers (service/elasticloadbalancingv2) on node ports, with the EC2 security-group rules
// they need. It owns what it creates through tags (tags.go), finds its resources by name and
// tags rather than by memory, and converges every call: observe, compute the desired resources
// with pure functions (model.go), apply the difference one AWS resource per file.
package aws
