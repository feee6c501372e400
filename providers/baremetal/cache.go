package baremetal

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// The provider reads pools and namespaces on every Ensure, so it reads them from memory: from
// the binary's informer cache when it has one (portico-controller's manager), or from an
// AddressPool informer of its own (portico-ccm). Services are read only once, to rebuild the
// allocations, and always from the API server (see doc.go: a cache would not do there).

// cachedSource reads pools and namespaces from an informer cache shared with the binary's
// controllers and Services from the API server.
type cachedSource struct {
	api   apiSource
	cache client.Reader
}

var _ Source = cachedSource{}

func (s cachedSource) AddressPools(ctx context.Context) ([]v1alpha1.AddressPool, error) {
	var list v1alpha1.AddressPoolList
	// The pools are only read (ResolvePools copies what it keeps), so the cache's objects are
	// not copied.
	if err := s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing address pools from the cache: %w", err)
	}
	return list.Items, nil
}

func (s cachedSource) Services(ctx context.Context) ([]corev1.Service, error) {
	return s.api.Services(ctx)
}

func (s cachedSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := s.cache.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return nil, fmt.Errorf("getting namespace %s from the cache: %w", namespace, err)
	}
	return ns.Labels, nil
}

// informerSource reads pools from its own AddressPool informer, namespaces and Services from
// the API server (namespaces only when a pool selects them by label).
type informerSource struct {
	api      apiSource
	informer toolscache.SharedIndexInformer
}

var _ Source = (*informerSource)(nil)

// newInformerSource starts an AddressPool informer on c that runs until ctx ends.
func newInformerSource(ctx context.Context, c client.WithWatch) *informerSource {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			var list v1alpha1.AddressPoolList
			if err := c.List(ctx, &list, &client.ListOptions{Raw: &opts}); err != nil {
				return nil, err
			}
			return &list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &v1alpha1.AddressPoolList{}, &client.ListOptions{Raw: &opts})
		},
	}
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &v1alpha1.AddressPool{}, toolscache.SharedIndexInformerOptions{})
	go inf.RunWithContext(ctx)
	return &informerSource{api: apiSource{c: c}, informer: inf}
}

func (s *informerSource) AddressPools(ctx context.Context) ([]v1alpha1.AddressPool, error) {
	if !s.informer.HasSynced() && !toolscache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		return nil, fmt.Errorf("listing address pools: the AddressPool informer has not synced: %w", context.Cause(ctx))
	}
	objs := s.informer.GetStore().List()
	out := make([]v1alpha1.AddressPool, 0, len(objs))
	for _, o := range objs {
		// A shallow copy: the pools are only read.
		out = append(out, *o.(*v1alpha1.AddressPool))
	}
	return out, nil
}

func (s *informerSource) Services(ctx context.Context) ([]corev1.Service, error) {
	return s.api.Services(ctx)
}

func (s *informerSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	return s.api.NamespaceLabels(ctx, namespace)
}
