package operations

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/registry"
)

// TestControllerLeaseGoneWithDeployment: portico-controller's leader-election Lease is owned by
// its Deployment, so deleting the Deployment (helm uninstall, a GitOps prune) lets the real
// garbage collector delete the Lease, while the Lease of a running controller stays and is
// held (and, deleted under it, is created again with its owner). A Lease an earlier version
// left without an owner gets one at the next start. Before
// the fix the controller created the Lease with no owner and `helm uninstall` left it behind.
func TestControllerLeaseGoneWithDeployment(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Controllers: append([]string{"garbagecollector"}, cluster.DefaultControllers...)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Client()
	const ns = "lease"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	deployment := func(name string) {
		t.Helper()
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "portico-controller"}}}}}}
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := func(lease, deployment string) *cluster.Manager {
		t.Helper()
		cfg := config.DefaultController(registry.NewConfigs())
		cfg.Classes = map[string]string{"portico-lb.io/" + lease: baremetal.Name}
		cfg.LeaderElectionNamespace, cfg.LeaderElectionID, cfg.Deployment = ns, lease, deployment
		cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "0"
		cfg.Providers[baremetal.Name].(*baremetal.Config).DisableMetrics = true
		mgr, err := controllers.NewManager(ctx, cfg, c.Config(), ctrl.Log.WithName(lease), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cluster.StartManager(t, mgr)
	}
	// heldAndOwned waits until the Lease is held by a controller and owned by the Deployment.
	heldAndOwned := func(lease, deployment string) {
		t.Helper()
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, time.Minute, "Lease "+lease+" held and owned by Deployment "+deployment, func() error {
			l, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return fmt.Errorf("no holder")
			}
			if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != d.UID || l.OwnerReferences[0].Kind != "Deployment" {
				return fmt.Errorf("owners %+v, want Deployment %s (%s)", l.OwnerReferences, deployment, d.UID)
			}
			return nil
		})
	}

	// A new installation: the controller creates its Lease with the owner.
	deployment("portico-controller")
	m := start("portico-controller", "portico-controller")
	heldAndOwned("portico-controller", "portico-controller")

	// The Lease deleted under the running leader (as the garbage collector does when an
	// uninstall deletes the Deployment in the foreground before the pods stop): the controller
	// creates it again only with its owner.
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, "portico-controller", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	heldAndOwned("portico-controller", "portico-controller")

	// An upgrade from a version that made the Lease without an owner.
	deployment("upgraded")
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "upgraded", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	up := start("upgraded", "upgraded")
	heldAndOwned("upgraded", "upgraded")

	// The uninstall: the controllers stop (releasing their Leases), the Deployments are
	// deleted, and the garbage collector takes each Lease with its owner.
	m.Stop()
	up.Stop()
	for _, name := range []string{"portico-controller", "upgraded"} {
		if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("Lease %s before the Deployment is deleted: %v", name, err)
		}
		if err := cs.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"portico-controller", "upgraded"} {
		wait.For(t, time.Minute, "Lease "+name+" deleted with its Deployment", func() error {
			_, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("still there")
		})
	}
}
