package operations_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2/textlogger"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/providers/registry"
)

// ownersEnv is one owners test's control plane (its own kube-apiserver, no
// kube-controller-manager) and namespace. Controller instances run in the test process, each
// with its own reference provider, which outlives the instance's restarts as a cloud's load
// balancers outlive the controller.
type ownersEnv struct {
	t    *testing.T
	cl   *cluster.Cluster
	ns   string
	svcs services.Helper
}

var ownersLogger = sync.OnceValue(func() logr.Logger {
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(0)))
})

func ownersSetup(t *testing.T) *ownersEnv {
	t.Helper()
	cl := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	e := &ownersEnv{t: t, cl: cl, ns: "owners"}
	if err := cl.EnsureNamespace(context.Background(), e.ns); err != nil {
		t.Fatal(err)
	}
	e.svcs = services.Helper{TB: t, CS: cl.Client(), Namespace: e.ns, Timeout: 60 * time.Second}
	return e
}

// ownersClass is the loadBalancerClass named short.
func ownersClass(short string) string { return "portico-lb.io/" + short }

// ownersInstance is one portico-controller installation: a name (its leader-election id, so
// its instance is "owners/<name>"), a provider, and the running manager.
type ownersInstance struct {
	e    *ownersEnv
	name string
	prov *reference.Provider
	mgr  *cluster.Manager
}

// instance prepares installation name with a provider allocating from pool.
func (e *ownersEnv) instance(name, pool string) *ownersInstance {
	return &ownersInstance{e: e, name: name, prov: reference.New(reference.Options{
		Name: "test", Pool: netip.MustParsePrefix(pool), Capabilities: providers.Capabilities{MixedProtocols: true}})}
}

// config is the installation's configuration serving classes (short names) with its provider.
func (in *ownersInstance) config(classes ...string) config.Controller[registry.Configs] {
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{}
	for _, c := range classes {
		cfg.Classes[ownersClass(c)] = "test"
	}
	cfg.ResyncPeriod.Duration = 0
	cfg.LeaderElect = false
	cfg.LeaderElectionNamespace, cfg.LeaderElectionID = in.e.ns, in.name
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	return cfg
}

// instanceName is the owner the installation records: "<lease namespace>/<lease id>".
func (in *ownersInstance) instanceName() string { return in.e.ns + "/" + in.name }

// start (re)starts the installation's controller serving classes: a configuration edit is a
// stop and a start with the new configuration.
func (in *ownersInstance) start(classes ...string) {
	in.e.t.Helper()
	in.stop()
	mgr, err := controllers.NewManager(context.Background(), in.config(classes...), in.e.cl.Config(), ownersLogger().WithName(in.name),
		map[string]providers.Provider{"test": in.prov})
	if err != nil {
		in.e.t.Fatal(err)
	}
	in.mgr = cluster.StartManager(in.e.t, mgr)
}

func (in *ownersInstance) stop() {
	if in.mgr != nil {
		in.mgr.Stop()
		in.mgr = nil
	}
}

// deletes counts the provider's Delete calls.
func (in *ownersInstance) deletes() int { return in.prov.Calls()[reference.OpDelete] }

// has tells whether the provider holds a load balancer for svc.
func (in *ownersInstance) has(svc *corev1.Service) bool {
	return slices.Contains(in.prov.Refs(), ownersRef(svc))
}

// ownersRef is svc's reference for providers.
func ownersRef(svc *corev1.Service) providers.Ref {
	return providers.Ref{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}
}

// lb creates a LoadBalancer Service of class short.
func (e *ownersEnv) lb(name, short string, mutate ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	return e.svcs.Create(e.svcs.LoadBalancer(name, append([]func(*corev1.Service){services.WithClass(ownersClass(short))}, mutate...)...))
}

// ownersCondition accepts a Service whose Portico condition has reason.
func ownersCondition(reason string) func(*corev1.Service) string {
	return func(s *corev1.Service) string {
		c := meta.FindStatusCondition(s.Status.Conditions, service.ConditionReady)
		if c == nil || c.Reason != reason {
			return fmt.Sprintf("condition %+v, want reason %s", c, reason)
		}
		return ""
	}
}

// ready waits for Service name to be provisioned and returns it.
func (e *ownersEnv) ready(name string) *corev1.Service {
	e.t.Helper()
	return e.svcs.Wait(name, "provisioned", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return "no ingress"
		}
		return ownersCondition(service.ReasonProvisioned)(s)
	})
}

// notServed waits until Service name is reported as not served, or lost its finalizer (the
// fault: its load balancer deleted), and fails at once in the second case.
func (e *ownersEnv) notServed(name string) *corev1.Service {
	e.t.Helper()
	svc := e.svcs.Wait(name, "reported as not served, or cleaned up", func(s *corev1.Service) string {
		if !slices.Contains(s.Finalizers, service.Finalizer) {
			return ""
		}
		return ownersCondition(service.ReasonClassNotServed)(s)
	})
	if !slices.Contains(svc.Finalizers, service.Finalizer) {
		e.t.Fatalf("%s lost its finalizer and load balancer: finalizers %v, status %+v", name, svc.Finalizers, svc.Status)
	}
	return svc
}

// unchanged fails unless Service name still has its finalizer, the holder and the ingress it
// had in was.
func (e *ownersEnv) unchanged(was *corev1.Service, holder string) {
	e.t.Helper()
	now := e.svcs.Get(was.Name)
	if !slices.Contains(now.Finalizers, service.Finalizer) {
		e.t.Errorf("%s lost its finalizer: %v", was.Name, now.Finalizers)
	}
	if got := ownersHolder(now); got != holder {
		e.t.Errorf("%s is held by %q, want %q", was.Name, got, holder)
	}
	if !equality.Semantic.DeepEqual(now.Status.LoadBalancer.Ingress, was.Status.LoadBalancer.Ingress) {
		e.t.Errorf("%s ingress changed: %v -> %v", was.Name, was.Status.LoadBalancer.Ingress, now.Status.LoadBalancer.Ingress)
	}
}

// ownersHolder is the instance recorded as a Service's holder.
func ownersHolder(svc *corev1.Service) string { return svc.Annotations[annotations.Owner] }

// reasons lists the Event reasons about Service name, for messages.
func (e *ownersEnv) reasons(name string) string { return strings.Join(e.svcs.Reasons(name), ",") }
