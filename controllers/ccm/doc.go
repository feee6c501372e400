// Package ccm runs Portico providers inside the stock Kubernetes cloud-controller-manager
// (k8s.io/cloud-provider): it adapts any providers.Provider to cloudprovider.Interface, so the
// upstream service controller, not Portico's, drives class-less LoadBalancer Services.
//
// It owns the adapter and nothing else:
//
//   - Cloud (cloudprovider.Interface): ProviderName "portico"; LoadBalancer is the only
//     capability, Instances, InstancesV2, Zones, Clusters and Routes report unsupported.
//   - its cloudprovider.LoadBalancer, one declarative Provider call per method:
//     GetLoadBalancer is Provider.Get (providers.ErrNotFound means "does not exist");
//     EnsureLoadBalancer builds the model with controllers/servicemodel.BuildLoadBalancer (the
//     provider's own annotation keys through its ParseOptions) and calls Provider.Ensure; UpdateLoadBalancer is the same Ensure with the new node set, made only
//     when the load balancer exists; EnsureLoadBalancerDeleted is Provider.Delete.
//     GetLoadBalancerName is the stock cloudprovider.DefaultLoadBalancerName; providers name
//     their resources from the Service's namespace, name and UID instead.
//   - the error mapping, in one function: a Service that fails BuildLoadBalancer is an
//     *InvalidServiceError listing every problem with its field path, and the provider is not
//     called; *providers.RetryError becomes k8s.io/cloud-provider/api.RetryError (requeue after
//     its fixed delay); every other error is wrapped and left to the controller's backoff.
//   - NewFromConfig, which builds the provider a validated cloud config (config.CCM, read by
//     cmd/portico-ccm from --cloud-config) names, through the provider registry, and returns
//     the Cloud over it. cmd/portico-ccm returns that Cloud from the stock command's cloud
//     initializer; no cloudprovider.Factory is registered.
//
// What the stock controller does and Portico's own controller does differently: it ignores
// every Service with a loadBalancerClass, uses the finalizer
// service.kubernetes.io/load-balancer-cleanup, reports outcomes only as Events (no status
// conditions), retries invalid input with exponential backoff (it has no terminal errors), and
// never re-ensures an unchanged Service, so drift is repaired only after a restart or a change.
// The adapter never modifies the Service or Nodes it is passed and never writes to the API
// server; the stock controller adds the finalizer, patches status and records Events.
package ccm
