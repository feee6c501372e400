package controller_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/providers/registry"
)

// One control plane serves every test of the package; each test owns its own namespace,
// loadBalancerClass and controller instance, so tests do not see each other's Services.
var testCluster *cluster.Cluster

func TestMain(m *testing.M) {
	cluster.Main(m, &testCluster, cluster.SuiteOptions{Options: cluster.Options{Controllers: []string{}}})
}

// env is one test's slice of the cluster: a namespace, a class, a running controller.
type env struct {
	t     *testing.T
	ns    string
	class string
	cs    kubernetes.Interface
	prov  *reference.Provider
	mgr   *cluster.Manager // the running controller
}

type envOptions struct {
	caps       *providers.Capabilities
	resync     time.Duration
	classless  bool
	leaderElec bool
	prov       *reference.Provider
	// ignoreExclude runs the controller with --ignore-exclude-lb.
	ignoreExclude bool
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := newEnvNoController(t)
	e.prov = o.prov
	if e.prov == nil {
		caps := providers.Capabilities{SessionAffinity: true, MixedProtocols: true, RequestedIPs: true}
		if o.caps != nil {
			caps = *o.caps
		}
		e.prov = reference.New(reference.Options{Name: "test", Pool: netip.MustParsePrefix("198.18.128.0/20"), Capabilities: caps})
	}
	e.start(o)
	return e
}

func (e *env) start(o envOptions) {
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{e.class: "test"}
	if o.classless {
		cfg.Classes = map[string]string{}
		cfg.ClasslessProvider = "test"
	}
	cfg.ResyncPeriod.Duration = o.resync
	cfg.LeaderElect = o.leaderElec
	cfg.IgnoreExcludeLB = o.ignoreExclude
	cfg.LeaderElectionNamespace = e.ns
	cfg.LeaderElectionID = "portico-controller"
	cfg.LeaderElectionLease.Duration, cfg.LeaderElectionRenew.Duration, cfg.LeaderElectionRetry.Duration = 3*time.Second, 2*time.Second, 500*time.Millisecond
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	// config.KnownProviders does not list the test provider; the manager accepts it as extra.
	mgr, err := controllers.NewManager(context.Background(), cfg, testCluster.Config(), ctrl.Log.WithName(e.ns), map[string]providers.Provider{"test": e.prov})
	if err != nil {
		e.t.Fatal(err)
	}
	e.mgr = cluster.StartManager(e.t, mgr)
}

// shutdown stops the env's controller.
func (e *env) shutdown() { e.mgr.Stop() }

// svcs binds the Service helpers to the test and its namespace.
func (e *env) svcs() services.Helper {
	return services.Helper{TB: e.t, CS: e.cs, Namespace: e.ns, Timeout: 30 * time.Second}
}

func (e *env) lbService(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	return e.svcs().LoadBalancer(name, append([]func(*corev1.Service){services.WithClass(e.class)}, mutate...)...)
}

func (e *env) create(svc *corev1.Service) *corev1.Service { e.t.Helper(); return e.svcs().Create(svc) }

func (e *env) get(name string) *corev1.Service { e.t.Helper(); return e.svcs().Get(name) }

// update applies mutate with conflict retries.
func (e *env) update(name string, mutate func(*corev1.Service)) {
	e.t.Helper()
	e.svcs().Update(name, mutate)
}

// eventually waits up to 30 s for cond.
func (e *env) eventually(what string, cond func() (bool, error)) {
	e.t.Helper()
	wait.For(e.t, 30*time.Second, what, func() error {
		ok, err := cond()
		if err == nil && !ok {
			err = errors.New("not yet")
		}
		return err
	})
}

func (e *env) waitIngress(name string) *corev1.Service {
	e.t.Helper()
	var svc *corev1.Service
	e.eventually(name+" to get an ingress address", func() (bool, error) {
		svc = e.get(name)
		return len(svc.Status.LoadBalancer.Ingress) > 0, nil
	})
	return svc
}

func (e *env) waitCondition(name string, status metav1.ConditionStatus, reason string) *corev1.Service {
	e.t.Helper()
	var svc *corev1.Service
	e.eventually(fmt.Sprintf("%s condition %s=%s/%s", name, service.ConditionReady, status, reason), func() (bool, error) {
		svc = e.get(name)
		c := meta.FindStatusCondition(svc.Status.Conditions, service.ConditionReady)
		return c != nil && c.Status == status && c.Reason == reason, nil
	})
	return svc
}

// events returns the reasons of the Events about Service name.
func (e *env) events(name string) []string { e.t.Helper(); return e.svcs().Reasons(name) }

func (e *env) waitEvent(name, reason string) {
	e.t.Helper()
	e.eventually("event "+reason+" on "+name, func() (bool, error) {
		for _, r := range e.events(name) {
			if r == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

func (e *env) ref(svc *corev1.Service) providers.Ref {
	return providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
}

// desired waits until the provider's last ensured model for svc satisfies cond.
func (e *env) desired(svc *corev1.Service, what string, cond func(*providers.LoadBalancer) bool) *providers.LoadBalancer {
	e.t.Helper()
	var lb *providers.LoadBalancer
	e.eventually("provider model: "+what, func() (bool, error) {
		var ok bool
		lb, ok = e.prov.Desired(e.ref(svc))
		return ok && cond(lb), nil
	})
	return lb
}

func hasFinalizer(svc *corev1.Service) bool {
	for _, f := range svc.Finalizers {
		if f == service.Finalizer {
			return true
		}
	}
	return false
}
