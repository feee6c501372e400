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

// The provider reads pools, namespaces and the other Services' claims on every Ensure, so it
// reads them from memory: from the binary's informer cache when it has one
// (portico-controller's manager), or from AddressPool and Service informers of its own
// (portico-ccm). The rebuild of the allocations reads Services once, from the API server (see
// doc.go: a cache would not do there).

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

func (s cachedSource) WatchedServices(ctx context.Context) ([]corev1.Service, error) {
	var list corev1.ServiceList
	// Read only (ForeignClaims), so not copied.
	if err := s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing services from the cache: %w", err)
	}
	return list.Items, nil
}

func (s cachedSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := s.cache.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return nil, fmt.Errorf("getting namespace %s from the cache: %w", namespace, err)
	}
	return ns.Labels, nil
}

// informerSource reads pools and Services from informers of its own, namespaces and the
// rebuild's Services from the API server (namespaces only when a pool selects them by label).
type informerSource struct {
	api      apiSource
	informer toolscache.SharedIndexInformer // AddressPools
	services toolscache.SharedIndexInformer
}

var _ Source = (*informerSource)(nil)

// newInformerSource starts an AddressPool and a Service informer on c that run until ctx ends.
func newInformerSource(ctx context.Context, c client.WithWatch) *informerSource {
	pools := newInformer(c, &v1alpha1.AddressPool{}, func() client.ObjectList { return &v1alpha1.AddressPoolList{} })
	svcs := newInformer(c, &corev1.Service{}, func() client.ObjectList { return &corev1.ServiceList{} })
	// Only the spec, annotations and status are read (ForeignClaims): managed fields are not
	// kept in memory.
	_ = svcs.SetTransform(func(o any) (any, error) {
		if m, ok := o.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return o, nil
	})
	go pools.RunWithContext(ctx)
	go svcs.RunWithContext(ctx)
	return &informerSource{api: apiSource{c: c}, informer: pools, services: svcs}
}

func newInformer(c client.WithWatch, obj runtime.Object, newList func() client.ObjectList) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			if err := c.List(ctx, list, &client.ListOptions{Raw: &opts}); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, newList(), &client.ListOptions{Raw: &opts})
		},
	}
	return toolscache.NewSharedIndexInformerWithOptions(lw, obj, toolscache.SharedIndexInformerOptions{})
}

func synced(ctx context.Context, inf toolscache.SharedIndexInformer, what string) error {
	if !inf.HasSynced() && !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("listing %s: the informer has not synced: %w", what, context.Cause(ctx))
	}
	return nil
}

func (s *informerSource) WatchedServices(ctx context.Context) ([]corev1.Service, error) {
	if err := synced(ctx, s.services, "services"); err != nil {
		return nil, err
	}
	objs := s.services.GetStore().List()
	out := make([]corev1.Service, 0, len(objs))
	for _, o := range objs {
		out = append(out, *o.(*corev1.Service)) // shallow: read only
	}
	return out, nil
}

func (s *informerSource) AddressPools(ctx context.Context) ([]v1alpha1.AddressPool, error) {
	if err := synced(ctx, s.informer, "address pools"); err != nil {
		return nil, err
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
