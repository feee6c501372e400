// Package aws is the AWS provider: Classic ELBs (service/elasticloadbalancing) and Network Load
// Balancers (service/elasticloadbalancingv2) on node ports, with the EC2 security groups they
// need: each load balancer's own groups for its source ranges, and one backend group per
// cluster and VPC that every node group lets in (backendsg.go).
//
// A walk through it, in the order of a call:
//
//   - options.go: the Service's AWS keys parsed into ServiceOptions (ParseOptions; the rules in
//     options_common.go, options_classic.go, options_nlb.go, options_healthcheck.go);
//   - provider.go: the Provider (Ensure, Get, Delete) and its construction; plugin.go its
//     configuration;
//   - desired.go, desired_nlb.go, desired_classic.go, sgrules.go: the pure step, from the model
//     and the options to desiredLB (model.go), the resources AWS should hold;
//   - applied.go, nodeset.go, lbreader.go: a resync with nothing changed, or with only the node
//     set changed, skips the full read-back; reads are batched across Services;
//   - one file per AWS resource that converges it: nlb.go, classic.go, listeners.go,
//     targetgroups.go, securitygroups.go, backendsg.go, subnets.go, instances.go;
//   - api.go: every AWS operation made, one consumer-side interface per resource, and the
//     clients seam through which the resource files call them (tests inject fakes there);
//   - tags.go: ownership, every tag read and written; names.go: the names of what is created;
//     adoption.go: taking over cloud-provider-aws's load balancers in place;
//   - metrics.go and throttle.go: per-call counts, latency and retries; the client-side rate
//     limits and the SDK retryer's settings; deploy/aws/iam-policy.json is derived from api.go
//     and the scope of each action (iampolicy_test.go);
//   - sets.go and errors.go: helpers the resource files share.
//
// It owns what it creates through tags (tags.go), finds its resources by name and tags rather
// than by memory, and converges on every call.
package aws
