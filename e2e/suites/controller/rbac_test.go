package controller_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/providers/registry"
)

// TestDeployRBACIsSufficient applies deploy/controller (RBAC for real, the Deployment as a
// server-side dry run) and runs the controller with the ServiceAccount's own token: if a
// permission is missing, the Service never gets its ingress.
func TestDeployRBACIsSufficient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, path := range []string{"../../../deploy/controller/rbac.yaml", "../../../deploy/controller/deployment.yaml"} {
		if err := testCluster.Apply(ctx, path, "Deployment"); err != nil {
			t.Fatal(err)
		}
	}

	cs := testCluster.Client()
	tok, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "portico-controller",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restCfg := testCluster.Config()
	restCfg.BearerToken = tok.Status.Token

	ns, class := "rbac", "portico-lb.io/rbac"
	if err := testCluster.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{class: "test"}
	cfg.LeaderElect = true // in kube-system, as deployed
	cfg.LeaderElectionLease.Duration, cfg.LeaderElectionRenew.Duration, cfg.LeaderElectionRetry.Duration = 3*time.Second, 2*time.Second, 500*time.Millisecond
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	prov := reference.New(reference.Options{Name: "test", Pool: netip.MustParsePrefix("198.18.176.0/24")})
	mgr, err := controllers.NewManager(context.Background(), cfg, restCfg, ctrl.Log.WithName("rbac"), map[string]providers.Provider{"test": prov})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	e := &env{t: t, ns: ns, class: class, cs: cs, prov: prov}
	e.create(e.lbService("web"))
	svc := e.waitIngress("web")
	if c := meta.FindStatusCondition(svc.Status.Conditions, "portico-lb.io/LoadBalancerReady"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition = %+v", c)
	}
	e.waitEvent("web", "EnsuredLoadBalancer")
	if err := cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("service deleted through the finalizer", func() (bool, error) {
		_, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
