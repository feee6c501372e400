package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/ccm"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/providers/registry"
)

// BenchmarkProvision1000 creates 1,000 LoadBalancer Services against the real apiserver behind
// (a) portico-controller with the reference provider, (b) the stock k8s.io/cloud-provider service
// controller with the same provider through Portico's CCM adapter (the anchor: what every
// cloud-controller-manager runs), each with its default concurrency, and (c) portico-controller
// with the bare-metal provider allocating from an AddressPool, in one run. Each runs twice:
//
//   - burst: 16 clients create the 1,000 Services as fast as the apiserver takes them. This
//     saturates the 2 cores that etcd, the apiserver, kube-controller-manager and the controller
//     share, so its latencies measure throughput as much as latency;
//   - paced: one Service every 50 ms (20 per second, about half of what the burst sustains), the
//     latency a Service sees on a control plane that is busy but not saturated.
//
// For each it reports the latency from Create to status.loadBalancer.ingress (p50, p99), the
// floor under it (Create to the apiserver's ADDED watch event, which no controller can beat), the
// time until all are provisioned and the controller's apiserver writes per Service, and prints the
// ratios.
func BenchmarkProvision1000(b *testing.B) {
	const n = 1000
	results := map[string]provisionResult{}
	for _, load := range []struct {
		name     string
		interval time.Duration // between creates; 0 is a burst from 16 clients
	}{{"burst", 0}, {"paced", 50 * time.Millisecond}} {
		for _, ctl := range []struct {
			name      string
			start     startFunc
			provider  newProviderFunc
			classless bool // the stock controller owns only Services without a class
		}{
			{"portico-controller", startPortico, newReference, false},
			{"stock-service-controller", startStock, newReference, true},
			{"portico-controller-baremetal", startPortico, newBareMetal, false},
		} {
			b.Run(load.name+"/"+ctl.name, func(b *testing.B) {
				for range b.N {
					results[load.name+"/"+ctl.name] = benchProvision(b, n, load.interval, ctl.start, ctl.provider, ctl.classless)
				}
			})
		}
	}
	for _, load := range []string{"burst", "paced"} {
		p, s, bm := results[load+"/portico-controller"], results[load+"/stock-service-controller"], results[load+"/portico-controller-baremetal"]
		// Printed, not logged: a parent benchmark's log is dropped once it has sub-benchmarks.
		if p.total > 0 && s.total > 0 {
			fmt.Printf("BenchmarkProvision1000 (%s): portico/stock ratios at %d Services: p50 %.2fx, p99 %.2fx, all provisioned %.2fx, writes per Service %.2fx\n",
				load, n, ratio(p.p50, s.p50), ratio(p.p99, s.p99), ratio(p.total, s.total), p.writesPerSvc/s.writesPerSvc)
		}
		if bm.total > 0 && p.total > 0 {
			fmt.Printf("BenchmarkProvision1000 (%s): bare-metal at %d Services, create to ingress: p50 %s, p99 %s, all provisioned %s (reference provider: p50 %s, p99 %s, all %s; bare-metal/reference p50 %.2fx, p99 %.2fx, all %.2fx); floor (create to ADDED): p50 %s, p99 %s; provider's own allocation: p50 %s, p99 %s\n",
				load, n, bm.p50, bm.p99, bm.total.Round(time.Millisecond), p.p50, p.p99, p.total.Round(time.Millisecond),
				ratio(bm.p50, p.p50), ratio(bm.p99, p.p99), ratio(bm.total, p.total), bm.floorP50, bm.floorP99, bm.allocP50, bm.allocP99)
		}
	}
}

// newProviderFunc builds the provider one benchmark case runs with, for Services of class in ns.
type newProviderFunc func(ctx context.Context, b *testing.B, ns, class string) providers.Provider

func newReference(context.Context, *testing.B, string, string) providers.Provider {
	return reference.New(reference.Options{Name: "bench", Pool: netip.MustParsePrefix("198.18.160.0/20"),
		Capabilities: providers.Capabilities{MixedProtocols: true}})
}

// newBareMetal installs the AddressPool CRD and creates a pool of 1,022 addresses for ns only.
// It returns nil: portico-controller builds the bare-metal provider from its configuration (so
// that it reads pools from the manager's cache), as it does in production.
func newBareMetal(ctx context.Context, b *testing.B, ns, _ string) providers.Provider {
	if err := testCluster.InstallCRDs(ctx, filepath.Join("..", "..", "..", "deploy", "crds")); err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	cl, err := client.New(testCluster.Config(), client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: v1alpha1.AddressPoolSpec{
			Addresses:         []string{"198.18.176.0/22"},
			ServiceAllocation: &v1alpha1.ServiceAllocation{Namespaces: []string{ns}},
		},
	}
	if err := cl.Create(ctx, pool); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Delete(context.Background(), pool) })
	return nil
}

// allocationQuantiles estimates quantiles of the bare-metal provider's own allocation latency
// (portico_baremetal_allocation_duration_seconds, outcome assigned) from the histogram the
// manager registered in controller-runtime's registry, interpolating within a bucket as
// Prometheus's histogram_quantile does. It then unregisters the provider's collector (by its
// descriptors) so that a further run can register its own.
func allocationQuantiles(b *testing.B, qs ...float64) []time.Duration {
	defer ctrlmetrics.Registry.Unregister(baremetal.New(baremetal.Options{}).Collector())
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "portico_baremetal_allocation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "outcome" && l.GetValue() == "assigned" }) {
				continue
			}
			return histogramQuantiles(m.GetHistogram(), qs)
		}
	}
	b.Fatal(`portico_baremetal_allocation_duration_seconds{outcome="assigned"} is not in controller-runtime's registry`)
	return nil
}

func histogramQuantiles(h *dto.Histogram, qs []float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		rank := q * float64(h.GetSampleCount())
		lower, below := 0.0, uint64(0)
		for _, bk := range h.GetBucket() {
			if float64(bk.GetCumulativeCount()) >= rank {
				frac := 1.0
				if in := float64(bk.GetCumulativeCount() - below); in > 0 {
					frac = (rank - float64(below)) / in
				}
				out[i] = time.Duration((lower + frac*(bk.GetUpperBound()-lower)) * float64(time.Second))
				break
			}
			lower, below = bk.GetUpperBound(), bk.GetCumulativeCount()
		}
	}
	return out
}

type provisionResult struct {
	p50, p99, total time.Duration
	// Create to the ADDED watch event: the floor under p50 and p99.
	floorP50, floorP99 time.Duration
	writesPerSvc       float64
	// The bare-metal provider's own allocation latency (zero for the other cases).
	allocP50, allocP99 time.Duration
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// startFunc runs a controller owning class with the reference provider prov, using restCfg,
// until ctx ends; it returns a channel closed when the controller stopped.
type startFunc func(ctx context.Context, b *testing.B, restCfg *rest.Config, class string, prov providers.Provider) <-chan struct{}

func startPortico(ctx context.Context, b *testing.B, restCfg *rest.Config, class string, prov providers.Provider) <-chan struct{} {
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{class: "bench"}
	extra := map[string]providers.Provider{"bench": prov}
	if prov == nil {
		// Built by the manager from the configuration (newBareMetal).
		cfg.Classes, extra = map[string]string{class: baremetal.Name}, nil
	}
	cfg.LeaderElect = false
	cfg.ResyncPeriod.Duration = 0
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	mgr, err := controllers.NewManager(context.Background(), cfg, restCfg, ctrl.Log.WithName("bench"), extra)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			b.Error(err)
		}
	}()
	return done
}

// startStock runs the upstream service controller with ConcurrentServiceSyncs=1, its default.
// It owns class-less Services only, as upstream does; benchProvision creates those for it.
func startStock(ctx context.Context, b *testing.B, restCfg *rest.Config, _ string, prov providers.Provider) <-chan struct{} {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		b.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	sc, err := servicecontroller.New(ccm.New(ccm.Options{Provider: prov}), cs,
		factory.Core().V1().Services(), factory.Core().V1().Nodes(), "bench", utilfeature.DefaultFeatureGate)
	if err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Run(ctx, 1, controllersmetrics.NewControllerManagerMetrics("bench"))
	}()
	return done
}

// countingTransport counts mutating requests (writes) sent to the apiserver.
type countingTransport struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		c.writes.Add(1)
	}
	return c.next.RoundTrip(req)
}

func benchProvision(b *testing.B, n int, interval time.Duration, startCtl startFunc, newProv newProviderFunc, classless bool) provisionResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e6)
	class := "portico-lb.io/" + ns
	if err := testCluster.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	cs := testCluster.Client()
	for i := range 3 {
		name := fmt.Sprintf("bench-node-%d", i)
		if _, err := testCluster.RegisterNode(ctx, cluster.NodeSpec{Name: name, InternalIPs: []netip.Addr{netip.AddrFrom4([4]byte{198, 19, 210, byte(10 + i)})}}); err != nil {
			b.Fatal(err)
		}
	}

	var writes atomic.Int64
	restCfg := testCluster.Config()
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, writes: &writes} })
	restCfg.QPS, restCfg.Burst = 500, 1000

	prov := newProv(ctx, b, ns, class)
	mctx, stop := context.WithCancel(ctx)
	done := startCtl(mctx, b, restCfg, class, prov)
	defer func() {
		stop()
		<-done
	}()
	w, err := cs.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	latencies := make([]time.Duration, 0, n)
	floors := make([]time.Duration, 0, n)
	seen, added := map[string]bool{}, map[string]bool{}
	all := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			now := time.Now()
			if ev.Type == watch.Added {
				mu.Lock()
				if t0, ok := created[svc.Name]; ok && !added[svc.Name] {
					added[svc.Name] = true
					floors = append(floors, now.Sub(t0))
				}
				mu.Unlock()
			}
			if ev.Type != watch.Modified || len(svc.Status.LoadBalancer.Ingress) == 0 {
				continue
			}
			mu.Lock()
			if t0, ok := created[svc.Name]; ok && !seen[svc.Name] {
				seen[svc.Name] = true
				latencies = append(latencies, now.Sub(t0))
				if len(latencies) == n {
					close(all)
				}
			}
			mu.Unlock()
		}
	}()

	// Give the manager time to start its informers so the measurement is create -> ingress.
	time.Sleep(2 * time.Second)
	writes.Store(0)
	b.ResetTimer()
	start := time.Now()
	concurrency := 16
	var pace *time.Ticker
	if interval > 0 {
		// Paced: each create runs on its own goroutine so that a slow one does not shift the
		// schedule; 64 in flight is far more than a paced run ever has.
		concurrency, pace = 64, time.NewTicker(interval)
		defer pace.Stop()
	}
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	cls := &class
	if classless {
		cls = nil
	}
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: cls,
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		if pace != nil {
			<-pace.C
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
			if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d Services got an ingress", len(latencies), n)
	}
	total := time.Since(start)
	b.StopTimer()
	time.Sleep(time.Second) // let trailing writes (events) land before counting

	mu.Lock()
	slices.Sort(latencies)
	slices.Sort(floors)
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	var floorP50, floorP99 time.Duration
	if len(floors) > 0 {
		floorP50, floorP99 = floors[len(floors)/2], floors[len(floors)*99/100]
	}
	mu.Unlock()
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(writes.Load())/float64(n), "writes/svc")
	b.ReportMetric(total.Seconds(), "total-s")
	b.ReportMetric(float64(floorP99.Milliseconds()), "floor-p99-ms")
	b.Logf("%d Services: p50 %s, p99 %s, all in %s, %.2f apiserver writes per Service; create to ADDED event: p50 %s, p99 %s",
		n, p50, p99, total.Round(time.Millisecond), float64(writes.Load())/float64(n), floorP50, floorP99)
	res := provisionResult{p50: p50, p99: p99, total: total, writesPerSvc: float64(writes.Load()) / float64(n),
		floorP50: floorP50, floorP99: floorP99}
	if prov == nil { // the bare-metal provider, built by the manager
		q := allocationQuantiles(b, 0.5, 0.99)
		res.allocP50, res.allocP99 = q[0], q[1]
		b.ReportMetric(float64(res.allocP50.Microseconds())/1000, "alloc-p50-ms")
		b.ReportMetric(float64(res.allocP99.Microseconds())/1000, "alloc-p99-ms")
		b.Logf("bare-metal provider's own allocation latency (histogram estimate): p50 %s, p99 %s", res.allocP50, res.allocP99)
	}
	deleteServices(ctx, b, ns, n)
	return res
}

// deleteServices deletes the n Services in ns while their controller still runs and waits until
// they are gone. Left behind, they would slow the next case down: a Service with Portico's
// finalizer whose class a controller does not own is one that controller releases, so the next
// portico-controller would clean up 1,000 Services while its own are measured.
func deleteServices(ctx context.Context, b *testing.B, ns string, n int) {
	cs := testCluster.Client()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := cs.CoreV1().Services(ns).Delete(ctx, fmt.Sprintf("svc-%04d", i), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("the Services in %s were not all deleted: %v", ns, err)
	}
}
