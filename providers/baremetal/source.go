package baremetal

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// Source is what the provider reads from the cluster. It never writes.
type Source interface {
	AddressPools(ctx context.Context) ([]v1alpha1.AddressPool, error)
	// Services lists every Service from the API server (a quorum read): the one rebuild of
	// the allocations reads it.
	Services(ctx context.Context) ([]corev1.Service, error)
	// WatchedServices lists every Service as an informer last saw it (it may lag the API
	// server): every Ensure reads it for the addresses Services of other classes and
	// implementations hold (ForeignClaims). The items are shared with the informer: read only.
	WatchedServices(ctx context.Context) ([]corev1.Service, error)
	NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error)
}

// apiSource reads straight from the API server (quorum reads, no cache). The provider reads
// Services through it, once, to rebuild the allocations, and namespaces in portico-ccm.
type apiSource struct{ c client.Reader }

var _ Source = apiSource{}

// newAPIClient returns an uncached client for the objects the provider reads.
func newAPIClient(cfg *rest.Config) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	return c, nil
}

func (s apiSource) AddressPools(ctx context.Context) ([]v1alpha1.AddressPool, error) {
	var list v1alpha1.AddressPoolList
	if err := s.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing address pools: %w", err)
	}
	return list.Items, nil
}

func (s apiSource) Services(ctx context.Context) ([]corev1.Service, error) {
	var list corev1.ServiceList
	if err := s.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	return list.Items, nil
}

// WatchedServices of apiSource is a quorum read (apiSource has no informer).
func (s apiSource) WatchedServices(ctx context.Context) ([]corev1.Service, error) {
	return s.Services(ctx)
}

func (s apiSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := s.c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return nil, fmt.Errorf("getting namespace %s: %w", namespace, err)
	}
	return ns.Labels, nil
}
