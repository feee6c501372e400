package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestDeployRBACIsSufficient applies deploy/controller (RBAC for real, the Deployment as a
// server-side dry run) and runs the controller with the ServiceAccount's own token: if a
// permission is missing, the Service never gets its ingress.
func TestDeployRBACIsSufficient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	applyManifest(t, ctx, "../../deploy/controller/rbac.yaml", false)
	applyManifest(t, ctx, "../../deploy/controller/deployment.yaml", true)

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
	cfg := config.DefaultController()
	cfg.Classes = map[string]string{class: "test"}
	cfg.LeaderElect = true // in kube-system, as deployed
	cfg.LeaderElectionLease.Duration, cfg.LeaderElectionRenew.Duration, cfg.LeaderElectionRetry.Duration = 3*time.Second, 2*time.Second, 500*time.Millisecond
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
	prov := reference.New(reference.Options{Name: "test", Pool: netip.MustParsePrefix("198.18.176.0/24")})
	mgr, err := controllers.NewManager(cfg, restCfg, ctrl.Log.WithName("rbac"), map[string]providers.Provider{"test": prov})
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

// applyManifest creates every object of a multi-document YAML file (server-side dry run if
// dryRun); objects that already exist are left as they are.
func applyManifest(t *testing.T, ctx context.Context, path string, dryRun bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(testCluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(testCluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, gvk, err)
		}
		opts := metav1.CreateOptions{FieldValidation: "Strict"}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(ctx, obj, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: creating %s %s: %v", path, gvk.Kind, obj.GetName(), err)
		}
	}
}
