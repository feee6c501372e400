package ccm

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// replacementFirstCheck is how long after an EnsureLoadBalancer that returned a replacement
// the Service is read back (the stock controller writes the status right after the call).
const replacementFirstCheck = time.Second

// replacements finishes load-balancer replacements. A provider that replaces a load balancer
// (providers.Status.ReplacementPending) deletes the old one only on an Ensure whose input shows
// the Service's status naming the new one; the stock service controller calls
// EnsureLoadBalancer again only when the spec changes, so the adapter asks once more itself:
// it reads the Service back after its status was written and calls Ensure until the provider
// reports no replacement pending. A restart loses the queue, not the work: the stock
// controller's first sync after start calls EnsureLoadBalancer for every Service, and that
// call finishes the switch.
type replacements struct {
	lb     *loadBalancer
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu    sync.Mutex
	nodes map[types.NamespacedName][]*corev1.Node
}

func newReplacements(lb *loadBalancer, client kubernetes.Interface) *replacements {
	return &replacements{
		lb:     lb,
		client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "portico-replacements"}),
		nodes: map[types.NamespacedName][]*corev1.Node{},
	}
}

// add schedules a read-back of svc, remembering the nodes its load balancer was built with.
func (r *replacements) add(svc *corev1.Service, nodes []*corev1.Node) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	r.mu.Lock()
	r.nodes[key] = nodes
	r.mu.Unlock()
	r.queue.AddAfter(key, replacementFirstCheck)
}

// run works the queue until stop is closed.
func (r *replacements) run(stop <-chan struct{}) {
	go func() {
		<-stop
		r.queue.ShutDown()
	}()
	for r.next() {
	}
}

func (r *replacements) next() bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	again, err := r.finish(ctx, key)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Finishing load balancer replacement", "service", key)
		r.queue.AddRateLimited(key)
	case again:
		r.queue.AddRateLimited(key)
	default:
		r.queue.Forget(key)
		r.mu.Lock()
		delete(r.nodes, key)
		r.mu.Unlock()
	}
	return true
}

// finish calls Ensure with the Service as it is now; it reports whether the replacement is
// still pending.
func (r *replacements) finish(ctx context.Context, key types.NamespacedName) (bool, error) {
	svc, err := r.client.CoreV1().Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		// The stock controller's delete path removes every load balancer the Service owns.
		return false, nil
	}
	r.mu.Lock()
	nodes := r.nodes[key]
	r.mu.Unlock()
	lb, err := r.lb.build(svc, nodes)
	if err != nil {
		// The Service changed into something invalid; the stock controller reports it.
		return false, nil
	}
	st, err := r.lb.provider.Ensure(ctx, lb)
	if err != nil {
		return false, err
	}
	return st.ReplacementPending, nil
}
