// Package service is the reconciler for Services of type LoadBalancer. Each reconcile runs four
// steps: observe (the Service and the Nodes), build the desired providers.LoadBalancer with the
// pure BuildLoadBalancer, apply it through the Service's provider, and report through
// status.loadBalancer, the portico-lb.io/LoadBalancerReady condition and Events.
//
// It owns the finalizer portico-lb.io/load-balancer-cleanup (and, on class-less Services when it
// owns them, the stock service.kubernetes.io/load-balancer-cleanup), the record of which
// controller instance holds a Service and which provider made its load balancer (Ownership,
// ownership.go: only the holder changes or deletes it, and only a deletion or a type change
// deletes it), the orphans a holder no longer serves (orphans.go), the mapping of provider errors
// to reconcile results (ensureFailed), and the node-eligibility rules shared with portico-ccm.
package service
