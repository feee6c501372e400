package bgp

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// secretFirstWait is how long the first read of a newly referenced Secret waits for its watch
// to list it; later reads never wait (the watch's event triggers a sync instead).
const secretFirstWait = 3 * time.Second

// secretCache holds the password Secrets BGPPeers reference: one watch per referenced Secret,
// restricted to it by a metadata.name field selector, so that the agent needs get, list and
// watch on those Secrets only (RBAC resourceNames in their namespace) and reads none other.
// A change of a watched Secret asks for a sync: a rotated password restarts the session with
// it. Watches of Secrets no BGPPeer references any more are stopped.
type secretCache struct {
	ctx    context.Context // the watches' lifetime
	cs     kubernetes.Interface
	resync func()

	mu      sync.Mutex
	watches map[types.NamespacedName]*secretWatch
}

type secretWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	waited bool // the first read waited for the list

	mu      sync.Mutex
	lastErr error // the watch's last list or watch error, until it lists again
}

// newSecretCache returns an empty cache whose watches end with ctx (or retain, stop).
func newSecretCache(ctx context.Context, cs kubernetes.Interface, resync func()) *secretCache {
	return &secretCache{ctx: ctx, cs: cs, resync: resync, watches: map[types.NamespacedName]*secretWatch{}}
}

// get returns the Secret, starting its watch on first use; ctx bounds the first wait.
func (c *secretCache) get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	c.mu.Lock()
	w := c.watches[key]
	if w == nil {
		w = c.start(key)
		c.watches[key] = w
	}
	c.mu.Unlock()
	if !w.inf.HasSynced() && !w.waited {
		w.waited = true
		wctx, cancel := context.WithTimeout(ctx, secretFirstWait)
		cache.WaitForCacheSync(wctx.Done(), w.inf.HasSynced)
		cancel()
	}
	if !w.inf.HasSynced() {
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		return nil, fmt.Errorf("reading Secret %s: not listed yet", key)
	}
	obj, ok, err := w.inf.GetStore().GetByKey(key.String())
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	if !ok {
		return nil, fmt.Errorf("reading Secret %s: not found", key)
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("reading Secret %s: unexpected %T", key, obj)
	}
	return sec, nil
}

// start runs the watch of one Secret.
func (c *secretCache) start(key types.NamespacedName) *secretWatch {
	ctx, cancel := context.WithCancel(c.ctx)
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
	}
	inf := coreinformers.NewFilteredSecretInformer(c.cs, key.Namespace, 0, cache.Indexers{}, byName)
	w := &secretWatch{inf: inf, cancel: cancel}
	_ = w.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
	})
	changed := func(any) {
		w.mu.Lock()
		w.lastErr = nil
		w.mu.Unlock()
		if c.resync != nil {
			c.resync()
		}
	}
	_, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Secret)
			n, ok2 := cur.(*corev1.Secret)
			if ok1 && ok2 && maps.EqualFunc(o.Data, n.Data, bytes.Equal) {
				return // not a change of the password
			}
			changed(cur)
		}})
	go w.inf.RunWithContext(ctx)
	return w
}

// retain stops the watches of Secrets not in keep.
func (c *secretCache) retain(keep map[types.NamespacedName]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, w := range c.watches {
		if !keep[key] {
			w.cancel()
			delete(c.watches, key)
		}
	}
}

// stop ends every watch.
func (c *secretCache) stop() { c.retain(nil) }
