package allocation_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/registry"
)

var testCluster *cluster.Cluster

func TestMain(m *testing.M) {
	cluster.Main(m, &testCluster, cluster.SuiteOptions{
		Options: cluster.Options{Controllers: []string{}, ServiceCIDRs: []string{cluster.ServiceCIDR, cluster.ServiceCIDR6}},
		CRDDir:  filepath.Join("..", "..", "..", "deploy", "crds"),
	})
}

func newClient(c *cluster.Cluster) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(c.Config(), client.Options{Scheme: scheme})
}

var envSeq atomic.Int32

// env is one test's namespace and class, its pools, and the controllers it runs.
type env struct {
	t     *testing.T
	ns    string
	class string
	cs    kubernetes.Interface
	cl    client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	n := envSeq.Add(1)
	e := &env{t: t, ns: fmt.Sprintf("bm-%d", n), class: fmt.Sprintf("portico-lb.io/bm-%d", n), cs: testCluster.Client()}
	cl, err := newClient(testCluster)
	if err != nil {
		t.Fatal(err)
	}
	e.cl = cl
	if _, err := e.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Pools are cluster-scoped: remove this test's so the next test's Services do not see them.
		var list v1alpha1.AddressPoolList
		if err := e.cl.List(context.Background(), &list); err != nil {
			t.Errorf("listing pools: %v", err)
			return
		}
		for i := range list.Items {
			if err := e.cl.Delete(context.Background(), &list.Items[i]); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting pool %s: %v", list.Items[i].Name, err)
			}
		}
	})
	return e
}

// start runs a controller for e's class; leaderElect makes it compete for e's Lease.
func (e *env) start(leaderElect bool) *cluster.Manager {
	e.t.Helper()
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{e.class: baremetal.Name}
	cfg.LeaderElect = leaderElect
	cfg.LeaderElectionNamespace = e.ns
	cfg.LeaderElectionLease.Duration, cfg.LeaderElectionRenew.Duration, cfg.LeaderElectionRetry.Duration = 3*time.Second, 2*time.Second, 500*time.Millisecond
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	// The manager builds the provider from the configuration, as portico-controller does, so
	// that it reads pools from the manager's cache. Several controllers share this process:
	// their metrics would collide in controller-runtime's registry.
	cfg.Providers[baremetal.Name].(*baremetal.Config).DisableMetrics = true
	// NewManager adds the v1alpha1 scheme and the pool reconciler since a class maps to baremetal.
	mgr, err := controllers.NewManager(context.Background(), cfg, testCluster.Config(), ctrl.Log.WithName(e.ns), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return cluster.StartManager(e.t, mgr)
}

func (e *env) pool(name string, mutate func(*v1alpha1.AddressPool), addrs ...string) {
	e.t.Helper()
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{Addresses: addrs}}
	if mutate != nil {
		mutate(ap)
	}
	if err := e.cl.Create(context.Background(), ap); err != nil {
		e.t.Fatalf("creating pool %s: %v", name, err)
	}
}

func (e *env) svc(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	return e.svcs().Create(e.svcs().LoadBalancer(name, append([]func(*corev1.Service){services.WithClass(e.class)}, mutate...)...))
}

// svcs binds the Service helpers to the test and its namespace.
func (e *env) svcs() services.Helper {
	return services.Helper{TB: e.t, CS: e.cs, Namespace: e.ns, Timeout: 60 * time.Second}
}

func (e *env) get(name string) *corev1.Service { e.t.Helper(); return e.svcs().Get(name) }

func (e *env) update(name string, mutate func(*corev1.Service)) {
	e.t.Helper()
	e.svcs().Update(name, mutate)
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	e.svcs().Eventually(what, wait.True(cond))
}

// ips returns the ingress IPs of name.
func (e *env) ips(name string) []netip.Addr {
	e.t.Helper()
	var out []netip.Addr
	for _, in := range e.get(name).Status.LoadBalancer.Ingress {
		out = append(out, netip.MustParseAddr(in.IP))
	}
	return out
}

// waitIPs waits until name has n ingress IPs, all with ipMode VIP, and returns them.
func (e *env) waitIPs(name string, n int) []netip.Addr {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s to get %d ingress IP(s)", name, n), func() bool {
		ing := e.get(name).Status.LoadBalancer.Ingress
		if len(ing) != n {
			return false
		}
		for _, in := range ing {
			if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeVIP {
				return false
			}
		}
		return true
	})
	return e.ips(name)
}

func (e *env) waitCondition(name, reason string) *metav1.Condition {
	e.t.Helper()
	var c *metav1.Condition
	e.eventually(name+" condition reason "+reason, func() bool {
		c = meta.FindStatusCondition(e.get(name).Status.Conditions, service.ConditionReady)
		return c != nil && c.Reason == reason
	})
	return c
}

func (e *env) waitEvent(namespace, name, reason string) string {
	e.t.Helper()
	h := e.svcs()
	h.Namespace = namespace
	return h.WaitEvent(name, reason, "").Message
}

func (e *env) getPool(name string) *v1alpha1.AddressPool {
	e.t.Helper()
	ap := &v1alpha1.AddressPool{}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Name: name}, ap); err != nil {
		e.t.Fatalf("getting pool %s: %v", name, err)
	}
	return ap
}
