package operations

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/registry"
)

// poolsEnv is the fixture of the pool tests: a control plane of their own (with Portico's
// CRDs), a namespace, and the Service helpers bound to the test.
type poolsEnv struct {
	t  *testing.T
	c  *cluster.Cluster
	cl client.Client
	ns string
}

func poolsStart(t *testing.T) *poolsEnv {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCRDs(ctx, filepath.Join("..", "..", "..", "deploy", "crds")); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	e := &poolsEnv{t: t, c: c, cl: cl, ns: "pools"}
	if err := c.EnsureNamespace(ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	return e
}

// controller runs portico-controller's manager in this process, as the allocation suite does:
// classes maps each loadBalancerClass it serves to its provider, classless is the provider of
// class-less Services ("" none).
func (e *poolsEnv) controller(classes map[string]string, classless string) *cluster.Manager {
	e.t.Helper()
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes, cfg.ClasslessProvider = classes, classless
	cfg.LeaderElect = false
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	// Other tests of the package may run managers in this process too.
	cfg.Providers[baremetal.Name].(*baremetal.Config).DisableMetrics = true
	mgr, err := controllers.NewManager(context.Background(), cfg, e.c.Config(), ctrl.Log.WithName("pools"), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return cluster.StartManager(e.t, mgr)
}

func (e *poolsEnv) pool(name string, addrs ...string) {
	e.t.Helper()
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.AddressPoolSpec{Addresses: addrs}}
	if err := e.cl.Create(context.Background(), ap); err != nil {
		e.t.Fatalf("creating pool %s: %v", name, err)
	}
}

func (e *poolsEnv) svcs() services.Helper {
	return services.Helper{TB: e.t, CS: e.c.Client(), Namespace: e.ns, Timeout: 60 * time.Second}
}

// foreign creates a LoadBalancer Service of class (nil: none) and writes ip into its status, as
// another implementation (or anyone with services/status) would.
func (e *poolsEnv) foreign(name string, class *string, ip string) {
	e.t.Helper()
	svc := e.svcs().Create(e.svcs().LoadBalancer(name, func(s *corev1.Service) { s.Spec.LoadBalancerClass = class }))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if _, err := e.c.Client().CoreV1().Services(e.ns).UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("writing the status of %s: %v", name, err)
	}
}
