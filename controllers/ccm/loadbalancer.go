package ccm

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/providers"
)

// loadBalancer implements cloudprovider.LoadBalancer over a Portico Provider. Every method
// treats the Service and Nodes it is given as read-only: it only reads them to build the model.
// clusterName (the stock --cluster-name) is ignored: providers name and tag what they own from
// the Service's namespace, name and UID.
type loadBalancer struct {
	provider providers.Provider
	caps     providers.Capabilities
	// followUp finishes replacements (replacements.go); nil until Initialize.
	followUp *replacements
}

var _ cloudprovider.LoadBalancer = (*loadBalancer)(nil)

// GetLoadBalancer implements cloudprovider.LoadBalancer with Provider.Get; ErrNotFound means
// the load balancer does not exist, which is not an error.
func (b *loadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	ref := refOf(svc)
	st, err := b.provider.Get(ctx, ref)
	if errors.Is(err, providers.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, cloudError(err, "getting load balancer for "+ref.String())
	}
	status := servicemodel.ToServiceStatus(st)
	return &status, true, nil
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer with the stock naming ("a" + the
// UID without dashes, at most 32 characters). The stock service controller does not use it;
// Portico providers name their resources themselves from the Service's Ref, so this name is
// only what other cloud-provider tooling would expect to see.
func (b *loadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer: it builds the complete desired
// load balancer from the Service and the nodes (the stock controller has already filtered them
// with its stable node-set predicates; BuildLoadBalancer applies the same rules again, which
// changes nothing) and hands it to Provider.Ensure. A Service that cannot be expressed returns
// an *InvalidServiceError listing every problem, and the provider is not called.
func (b *loadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	lb, err := b.build(svc, nodes)
	if err != nil {
		return nil, err
	}
	st, err := b.provider.Ensure(ctx, lb)
	if err != nil {
		return nil, cloudError(err, "ensuring load balancer for "+lb.Ref.String())
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Ensured load balancer", "service", klog.KObj(svc), "provider", b.provider.Name(), "nodes", len(lb.Nodes))
	// The stock controller has no way to turn these into Events: they are logged.
	for _, w := range st.Warnings {
		logger.Info("Provider ignores a setting", "service", klog.KObj(svc), "warning", w)
	}
	if st.ReplacementPending {
		if b.followUp != nil {
			b.followUp.add(svc, nodes)
		} else {
			logger.Info("Load balancer replaced; the old one is deleted on the next sync of the Service", "service", klog.KObj(svc))
		}
	}
	status := servicemodel.ToServiceStatus(st)
	return &status, nil
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer. Portico providers are declarative,
// so a node-set change is the same Ensure call with the new nodes. It first checks that the load
// balancer exists: the stock controller calls Update from its node-sync goroutine, concurrently
// with Service deletion, and a declarative Ensure would otherwise re-create a load balancer that
// was just deleted for a Service that is going away. An absent load balancer has no hosts to
// update; the Service sync path creates it when it is wanted.
func (b *loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	_, exists, err := b.GetLoadBalancer(ctx, clusterName, svc)
	if err != nil {
		return err
	}
	if !exists {
		klog.FromContext(ctx).V(2).Info("Skipped node update of a missing load balancer", "service", klog.KObj(svc))
		return nil
	}
	lb, err := b.build(svc, nodes)
	if err != nil {
		return err
	}
	if _, err := b.provider.Ensure(ctx, lb); err != nil {
		return cloudError(err, "updating load balancer hosts for "+lb.Ref.String())
	}
	return nil
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer with Provider.Delete, which
// removes everything the provider owns for the Service and succeeds when nothing is left.
func (b *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	ref := refOf(svc)
	if err := b.provider.Delete(ctx, ref); err != nil {
		return cloudError(err, "deleting load balancer for "+ref.String())
	}
	return nil
}

// build is the pure step: Service and nodes in, desired model or every problem out.
func (b *loadBalancer) build(svc *corev1.Service, nodes []*corev1.Node) (*providers.LoadBalancer, error) {
	lb, errs := servicemodel.BuildLoadBalancer(svc, derefNodes(nodes), b.caps, b.provider.ParseOptions)
	if len(errs) > 0 {
		return nil, &InvalidServiceError{Service: refOf(svc).String(), Errs: errs}
	}
	return lb, nil
}

// derefNodes copies the node structs (not their maps and slices, which BuildLoadBalancer only
// reads) into the slice BuildLoadBalancer takes.
func derefNodes(nodes []*corev1.Node) []corev1.Node {
	out := make([]corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			out = append(out, *n)
		}
	}
	return out
}

// refOf identifies svc's load balancer exactly as BuildLoadBalancer does.
func refOf(svc *corev1.Service) providers.Ref {
	return providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
}
