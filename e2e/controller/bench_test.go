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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/ccm"
	"github.com/portico-lb/portico/e2e/cluster"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/reference"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkProvision1000 creates 1,000 LoadBalancer Services against the real apiserver behind
// (a) portico-controller with the reference provider, (b) the stock k8s.io/cloud-provider service
// controller with the same provider through Portico's CCM adapter (the anchor: what every
// cloud-controller-manager runs), each with its default concurrency, and (c) portico-controller
// with the bare-metal provider allocating from an AddressPool, in one run. It reports the latency
// from Create to status.loadBalancer.ingress (p50, p99), the time until all are provisioned, and
// the controller's apiserver writes per Service, and logs the ratios.
func BenchmarkProvision1000(b *testing.B) {
	const n = 1000
	results := map[string]provisionResult{}
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
		b.Run(ctl.name, func(b *testing.B) {
			for range b.N {
				results[ctl.name] = benchProvision(b, n, ctl.start, ctl.provider, ctl.classless)
			}
		})
	}
	p, s, bm := results["portico-controller"], results["stock-service-controller"], results["portico-controller-baremetal"]
	if p.total > 0 && s.total > 0 {
		// Printed, not logged: a parent benchmark's log is dropped once it has sub-benchmarks.
		fmt.Printf("BenchmarkProvision1000: portico/stock ratios at %d Services: p50 %.2fx, p99 %.2fx, all provisioned %.2fx, writes per Service %.2fx\n",
			n, ratio(p.p50, s.p50), ratio(p.p99, s.p99), ratio(p.total, s.total), p.writesPerSvc/s.writesPerSvc)
	}
	if bm.total > 0 {
		fmt.Printf("BenchmarkProvision1000: bare-metal allocation at %d Services: p50 %s, p99 %s, all provisioned %s (reference provider: p50 %s, p99 %s)\n",
			n, bm.p50, bm.p99, bm.total.Round(time.Millisecond), p.p50, p.p99)
	}
}

// newProviderFunc builds the provider one benchmark case runs with, for Services of class in ns.
type newProviderFunc func(ctx context.Context, b *testing.B, ns, class string) providers.Provider

func newReference(context.Context, *testing.B, string, string) providers.Provider {
	return reference.New(reference.Options{Name: "bench", Pool: netip.MustParsePrefix("198.18.160.0/20"),
		Capabilities: providers.Capabilities{MixedProtocols: true}})
}

// newBareMetal installs the AddressPool CRD, creates a pool of 1,022 addresses for ns only, and
// builds the bare-metal provider as portico-controller does.
func newBareMetal(ctx context.Context, b *testing.B, ns, class string) providers.Provider {
	if err := testCluster.InstallCRDs(ctx, filepath.Join("..", "..", "deploy", "crds")); err != nil {
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
	p, err := baremetal.Plugin.NewConfig().New(ctx, providers.Env{
		RESTConfig: testCluster.Config(),
		// The controller runs it under the name "bench"; the provider recognises its Services by
		// its own name.
		ProviderFor: func(c *string) string {
			if c != nil && *c == class {
				return baremetal.Name
			}
			return ""
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

type provisionResult struct {
	p50, p99, total time.Duration
	writesPerSvc    float64
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// startFunc runs a controller owning class with the reference provider prov, using restCfg,
// until ctx ends; it returns a channel closed when the controller stopped.
type startFunc func(ctx context.Context, b *testing.B, restCfg *rest.Config, class string, prov providers.Provider) <-chan struct{}

func startPortico(ctx context.Context, b *testing.B, restCfg *rest.Config, class string, prov providers.Provider) <-chan struct{} {
	cfg := config.DefaultController()
	cfg.Classes = map[string]string{class: "bench"}
	cfg.LeaderElect = false
	cfg.ResyncPeriod.Duration = 0
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	mgr, err := controllers.NewManager(context.Background(), cfg, restCfg, ctrl.Log.WithName("bench"), map[string]providers.Provider{"bench": prov})
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

func benchProvision(b *testing.B, n int, startCtl startFunc, newProv newProviderFunc, classless bool) provisionResult {
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
	seen := map[string]bool{}
	all := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			svc := ev.Object.(*corev1.Service)
			if len(svc.Status.LoadBalancer.Ingress) == 0 {
				continue
			}
			now := time.Now()
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
	sem := make(chan struct{}, 16)
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
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	mu.Unlock()
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(writes.Load())/float64(n), "writes/svc")
	b.ReportMetric(total.Seconds(), "total-s")
	b.Logf("%d Services: p50 %s, p99 %s, all in %s, %.2f apiserver writes per Service",
		n, p50, p99, total.Round(time.Millisecond), float64(writes.Load())/float64(n))
	// The Services stay: the package's control plane is torn down after the run.
	return provisionResult{p50: p50, p99: p99, total: total, writesPerSvc: float64(writes.Load()) / float64(n)}
}
