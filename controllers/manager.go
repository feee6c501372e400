package controllers

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers/pool"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/registry"
)

// NewManager builds portico-controller's manager from a validated configuration: the providers
// it names, leader election on a Lease, the metrics and health endpoints, and the Service
// reconciler. ctx bounds building the providers and making the Deployment the Lease's owner. extra providers (by name) are added to or replace the configured ones; tests pass
// them to observe provider calls.
func NewManager(ctx context.Context, cfg config.Controller[registry.Configs], restCfg *rest.Config, logger logr.Logger, extra map[string]providers.Provider) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	var lock resourcelock.Interface
	if cfg.LeaderElect && cfg.Deployment != "" {
		cs, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return nil, err
		}
		if err := ownLease(ctx, cs, cfg.LeaderElectionNamespace, cfg.LeaderElectionID, cfg.Deployment); err != nil {
			return nil, err
		}
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader-election identity: %w", err)
		}
		lock = newOwnedLeaseLock(cs, cfg.LeaderElectionNamespace, cfg.LeaderElectionID, cfg.Deployment, host+"_"+string(uuid.NewUUID()))
	}
	lease, renew, retry := cfg.LeaderElectionLease.Duration, cfg.LeaderElectionRenew.Duration, cfg.LeaderElectionRetry.Duration
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        logger,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              cfg.LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionResourceLock:    "leases",
		LeaderElectionReleaseOnCancel: true,
		// With a Deployment, a lock that creates the Lease owned by it (the durations apply).
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &lease,
		RenewDeadline:                       &renew,
		RetryPeriod:                         &retry,
		Metrics:                             metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:              cfg.HealthProbeBindAddress,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	apiCheck, err := apiServerAnswers(restCfg)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("apiserver", apiCheck); err != nil {
		return nil, err
	}

	ownership := service.Ownership{Instance: cfg.InstanceName(), Classes: cfg.Classes, Classless: cfg.ClasslessProvider}
	provs, err := buildProviders(ctx, cfg, providers.Env{
		ClusterName: cfg.ClusterName,
		Logger:      logger.WithName("provider"),
		RESTConfig:  restCfg,
		Cache:       mgr.GetCache(),
		Metrics:     ctrlmetrics.Registry,
		ProviderFor: func(class *string) string {
			p, _ := ownership.ProviderFor(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}})
			return p
		},
	}, extra)
	if err != nil {
		return nil, err
	}
	rec, err := service.NewReconciler(mgr.GetClient(), service.Options{
		Ownership:       ownership,
		Providers:       provs,
		ResyncPeriod:    cfg.ResyncPeriod.Duration,
		IgnoreExcludeLB: cfg.IgnoreExcludeLB,
		Recorder:        mgr.GetEventRecorder("portico-controller"),
		Metrics:         service.ProcessMetrics(),
	})
	if err != nil {
		return nil, err
	}
	if err := rec.SetupWithManager(mgr, cfg.Workers); err != nil {
		return nil, fmt.Errorf("setting up service controller: %w", err)
	}
	// Address pools get their status and Events when the bare-metal provider is in use.
	if slices.Contains(cfg.ProvidersInUse(), baremetal.Plugin.Name) {
		if err := pool.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up address-pool controller: %w", err)
		}
	}
	return mgr, nil
}

// apiServerAnswers is a readiness check: the API server answers its own /readyz now. Synced
// caches stay synced when the API server goes out of reach, and a controller that cannot write
// a status or an Event cannot do its job, so it is not ready meanwhile.
func apiServerAnswers(restCfg *rest.Config) (healthz.Checker, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the API server check: %w", err)
	}
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), apiServerCheckTimeout)
		defer cancel()
		if err := dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("the API server at %s does not answer: %w", restCfg.Host, err)
		}
		return nil
	}, nil
}

// apiServerCheckTimeout bounds the API server check, below the kubelet's default probe timeout
// of 1 s so that the probe reports the check's reason, not its own timeout.
const apiServerCheckTimeout = 900 * time.Millisecond

// buildProviders instantiates every provider the configuration names, except those given in
// extra, which are used as they are.
func buildProviders(ctx context.Context, cfg config.Controller[registry.Configs], env providers.Env, extra map[string]providers.Provider) (map[string]providers.Provider, error) {
	var names []string
	for _, name := range cfg.ProvidersInUse() {
		if extra[name] == nil {
			names = append(names, name)
		}
	}
	out, err := cfg.Providers.Build(ctx, names, env)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, extra)
	return out, nil
}
