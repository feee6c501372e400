package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/e2e/cluster"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	ctrl "sigs.k8s.io/controller-runtime"
)

// BenchmarkProvision1000 creates 1,000 LoadBalancer Services against the real apiserver with the
// reference provider and reports the latency from Create to status.loadBalancer.ingress (p50,
// p99) and the controller's apiserver writes per Service.
func BenchmarkProvision1000(b *testing.B) {
	const n = 1000
	for range b.N {
		benchProvision(b, n)
	}
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

func benchProvision(b *testing.B, n int) {
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

	cfg := config.DefaultController()
	cfg.Classes = map[string]string{class: "bench"}
	cfg.LeaderElect = false
	cfg.ResyncPeriod.Duration = 0
	cfg.Workers = 8
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	prov := reference.New(reference.Options{Name: "bench", Pool: netip.MustParsePrefix("198.18.160.0/20"),
		Capabilities: providers.Capabilities{MixedProtocols: true}})
	mgr, err := controllers.NewManager(cfg, restCfg, ctrl.Log.WithName("bench"), map[string]providers.Provider{"bench": prov})
	if err != nil {
		b.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
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
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
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
	b.Logf("%d Services: p50 %s, p99 %s, all in %s, %.2f apiserver writes per Service, %d provider ensures",
		n, p50, p99, total.Round(time.Millisecond), float64(writes.Load())/float64(n), prov.Calls()[reference.OpEnsure])
	// The Services stay: the package's control plane is torn down after the run.
}
