//go:build e2e

package bgp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/portico-lb/portico/e2e/framework/cluster"
)

// TestSecretWatchWithManifestRBAC runs the Secret cache against a real kube-apiserver as
// portico-agent's ServiceAccount with deploy/agent.yaml's RBAC, which grants get, list and
// watch on kube-system/bgp-password by name only: the watch of that Secret works (the
// metadata.name field selector is what makes resourceNames apply to list and watch), a change
// of it asks for a sync and is read, and any other Secret is refused with a clear error.
func TestSecretWatchWithManifestRBAC(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Apply(ctx, filepath.Join("..", "..", "..", "deploy", "agent.yaml"), "DaemonSet"); err != nil {
		t.Fatal(err)
	}
	admin := c.Client()
	for name, pw := range map[string]string{"bgp-password": "one", "other": "not-yours"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: map[string][]byte{"password": []byte(pw)}}
		if _, err := admin.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "portico-agent",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfigWithToken(kubeconfig, c.Host(), tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	resyncs := make(chan struct{}, 10)
	sc := newSecretCache(ctx, agent, func() { resyncs <- struct{}{} })
	defer sc.stop()
	key := types.NamespacedName{Namespace: "kube-system", Name: "bgp-password"}
	sec, err := sc.get(ctx, key)
	if err != nil {
		t.Fatalf("reading the password Secret as portico-agent: %v", err)
	}
	if got := string(sec.Data["password"]); got != "one" {
		t.Fatalf("password %q, want one", got)
	}

	// Rotation: the watch sees the new password and asks for a sync.
	for len(resyncs) > 0 {
		<-resyncs
	}
	sec = sec.DeepCopy()
	sec.Data["password"] = []byte("two")
	if _, err := admin.CoreV1().Secrets("kube-system").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resyncs:
	case <-time.After(10 * time.Second):
		t.Fatal("the password change asked for no sync")
	}
	if sec, err := sc.get(ctx, key); err != nil || string(sec.Data["password"]) != "two" {
		t.Fatalf("after rotation: %v, %v; want password two", sec, err)
	}

	// Another Secret: RBAC refuses the watch, and the error says so (after the first wait).
	_, err = sc.get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "other"})
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("reading another Secret as portico-agent: %v; want a forbidden error", err)
	}
	t.Logf("another Secret: %v", err)
}
