package announceonly

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// TestChartRefusesBesideKubeProxy (issue 29): on a cluster that runs kube-proxy as kubeadm,
// kind and EKS install it (the DaemonSet kube-system/kube-proxy, here on the real API server),
// `helm install` of the chart with a dataplane (its default, agent.mode nftables) fails at
// once naming kube-proxy and agent.mode=none, and creates nothing: no agents left in a crash
// loop. With agent.mode none the same install renders (a server-side dry run, which looks the
// cluster up as an install does). On d6507e1 the chart installs its agents beside kube-proxy.
func TestChartRefusesBesideKubeProxy(t *testing.T) {
	setup(t)
	ctx := context.Background()
	if err := shared.Cluster.EnsureNamespace(ctx, "kube-system"); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"k8s-app": "kube-proxy"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.36.3"}}}}}}
	if _, err := shared.CS.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shared.CS.AppsV1().DaemonSets("kube-system").Delete(context.Background(), "kube-proxy", metav1.DeleteOptions{})
	})
	ch, err := loader.Load(filepath.Join("..", "..", "..", "deploy", "chart", "portico"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t)
	values := func(mode string) map[string]any {
		return map[string]any{
			"controller": map[string]any{"classlessProvider": "baremetal"},
			"agent":      map[string]any{"mode": mode, "announce": []any{"l2"}},
		}
	}

	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy = "portico-beside", namespace, kube.HookOnlyStrategy
	_, err = in.RunWithContext(ctx, ch, values("nftables"))
	if err == nil {
		t.Fatal("helm install with agent.mode nftables succeeded beside kube-proxy")
	}
	for _, want := range []string{"kube-proxy runs on this cluster", "kube-system/kube-proxy", "agent.mode=none"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("helm install's error lacks %q: %v", want, err)
		}
	}
	t.Logf("helm install beside kube-proxy: %v", err)
	if _, err := shared.CS.AppsV1().DaemonSets(namespace).Get(ctx, "portico-agent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused install left the agents' DaemonSet: %v", err)
	}

	in = action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.DryRunStrategy = "portico-beside", namespace, kube.HookOnlyStrategy, action.DryRunServer
	rel, err := in.RunWithContext(ctx, ch, values("none"))
	if err != nil {
		t.Fatalf("helm install --dry-run=server with agent.mode none beside kube-proxy: %v", err)
	}
	acc, err := release.NewAccessor(rel)
	if err != nil {
		t.Fatal(err)
	}
	if m := acc.Manifest(); !strings.Contains(m, "mode: none") || !strings.Contains(m, "healthzBindAddress: 0.0.0.0:10266") {
		t.Errorf("agent.mode none: the agent's configuration is not announce-only on port 10266:\n%s", m)
	}
}

// helmConfig is Helm's action configuration for the shared cluster's admin kubeconfig.
func helmConfig(t *testing.T) *action.Configuration {
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := shared.Cluster.KubeconfigPath(), namespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}
