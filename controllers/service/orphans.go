package service

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/annotations"
)

// Orphan is a Service that carries a Portico finalizer although its holder does not serve it.
type Orphan struct {
	Service *corev1.Service
	// Provider made its load balancer ("" when not recorded).
	Provider string
	// Unclaimed: no holder is recorded (a Service from a Portico that did not record holders),
	// so it may be another instance's; it is listed, never deleted.
	Unclaimed bool
}

// Orphans returns, sorted by namespace and name, the Services among svcs this instance holds
// but does not serve (its own orphans), then the unclaimed ones it does not serve.
func (o Ownership) Orphans(svcs []corev1.Service) []Orphan {
	var own, unclaimed []Orphan
	for i := range svcs {
		svc := &svcs[i]
		if _, served := o.ProviderFor(svc); served {
			continue
		}
		_, provider := annotations.OwnerOf(svc.Annotations)
		switch o.holder(svc) {
		case heldByMe:
			own = append(own, Orphan{Service: svc, Provider: provider})
		case heldUnclaimed:
			unclaimed = append(unclaimed, Orphan{Service: svc, Provider: provider, Unclaimed: true})
		}
	}
	for _, l := range [][]Orphan{own, unclaimed} {
		sort.Slice(l, func(i, j int) bool {
			a, b := l[i].Service, l[j].Service
			return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
		})
	}
	return append(own, unclaimed...)
}

// DeleteOrphan deletes the load balancer of an orphan this instance holds as the reconciler
// does for a deleted Service (cleanup): through its recorded provider (else through every one in
// opts.Providers), then clears its status and removes the finalizer and the holder record.
// opts.Ownership is the instance's; Events go to opts.Recorder when set. Unclaimed orphans are
// refused.
func DeleteOrphan(ctx context.Context, c client.Client, opts Options, orphan Orphan) error {
	if orphan.Unclaimed {
		return fmt.Errorf("service %s/%s records no holder: not deleting it", orphan.Service.Namespace, orphan.Service.Name)
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	r := &Reconciler{client: c, opts: opts, applied: map[types.NamespacedName]applied{}}
	return r.cleanup(ctx, orphan.Service.DeepCopy(), "")
}
