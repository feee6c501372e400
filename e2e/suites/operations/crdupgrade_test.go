package operations

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestCRDUpgradeCommand: the CRDs of an older release (9824d1b's, installed by `helm install`
// from the chart's crds/, as Helm 4 does: server-side apply as manager "helm") are not
// upgraded by `helm upgrade`; the one command docs/install.md gives,
// `kubectl apply --server-side --force-conflicts -f deploy/chart/portico/crds/` (server-side
// apply as manager "kubectl", conflicts forced), replaces them, and then the API server refuses
// 999.1.1.1/99. A pool stored before the upgrade that the new rules refuse stays, and can still
// be edited in its other fields (CRD validation ratcheting; the API server returns the rule's
// message as a warning), but not given another bad address. Without --force-conflicts the apply
// fails on a conflict with Helm's fields: what the docs warn about. On 9824d1b the last step
// fails: its CRDs accept 999.1.1.1/99.
func TestCRDUpgradeCommand(t *testing.T) {
	e := crdStart(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := e.helmConfig()
	old := crdChart(t, filepath.Join("testdata", "crds-9824d1b"))
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = "portico", "kube-system"
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	if _, err := in.RunWithContext(ctx, old, map[string]any{}); err != nil {
		t.Fatalf("helm install of 9824d1b's CRDs: %v", err)
	}
	// What an older Portico took, the new rules refuse.
	if _, err := e.create(ctx, "AddressPool", "stored-before", map[string]any{"addresses": []any{"198.18.181.5/24"}}, false); err != nil {
		t.Fatalf("9824d1b's CRD refused a pool with host bits: %v", err)
	}

	// helm upgrade with the new chart: Helm leaves crds/ alone.
	up := action.NewUpgrade(cfg)
	up.Namespace, up.WaitStrategy, up.Timeout = "kube-system", kube.HookOnlyStrategy, 2*time.Minute
	if _, err := up.RunWithContext(ctx, "portico", crdChart(t, crdDir), map[string]any{}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if _, err := e.create(ctx, "AddressPool", "after-helm-upgrade", crdSpec(t, `{addresses: [999.1.1.1/99]}`), true); err != nil {
		t.Errorf("after helm upgrade the old CRD should still be there (Helm never upgrades crds/), but: %v", err)
	}

	// kubectl apply --server-side (no --force-conflicts): a conflict with Helm's fields.
	if err := e.applyCRDs(ctx, crdDir, false); !apierrors.IsConflict(err) {
		t.Errorf("server-side apply without forcing conflicts: got %v, want a conflict (docs/install.md says --force-conflicts)", err)
	}
	// The documented command.
	if err := e.applyCRDs(ctx, crdDir, true); err != nil {
		t.Fatalf("kubectl apply --server-side --force-conflicts: %v", err)
	}
	var last error
	err := wait.Poll(ctx, 100*time.Millisecond, time.Minute, "the API server to refuse 999.1.1.1/99 with the upgraded CRD", func(ctx context.Context) error {
		_, last = e.create(ctx, "AddressPool", "after-apply", crdSpec(t, `{addresses: [999.1.1.1/99]}`), true)
		if last == nil {
			return fmt.Errorf("accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	crdCheck(t, last, []string{"spec.addresses[0]", "not a CIDR"})
	_, err = e.create(ctx, "AddressPool", "reversed", crdSpec(t, `{addresses: [198.18.181.20-198.18.181.10]}`), true)
	crdCheck(t, err, []string{"spec.addresses[0]", "must not be before its start"})

	// The stored pool stays and takes an edit that leaves its addresses alone.
	pools := e.dyn.Resource(crdPoolsGVR)
	p, err := pools.Get(ctx, "stored-before", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool stored before the upgrade: %v", err)
	}
	p.SetLabels(map[string]string{"team": "a"})
	if p, err = pools.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("editing the labels of a pool stored before the upgrade: %v", err)
	}
	if err := unstructured.SetNestedStringSlice(p.Object, []string{"198.18.182.5/24"}, "spec", "addresses"); err != nil {
		t.Fatal(err)
	}
	_, err = pools.Update(ctx, p, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	crdCheck(t, err, []string{"spec.addresses[0]", "has host bits set"})
}

// helmConfig is Helm's action configuration for the control plane (releases as Secrets, log
// discarded), with the field manager Helm's CLI uses.
func (e *crdEnv) helmConfig() *action.Configuration {
	e.t.Helper()
	kube.ManagedFieldsManager = "helm"
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := e.c.KubeconfigPath(), "kube-system"
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		e.t.Fatal(err)
	}
	return cfg
}

// crdChart is a chart named portico that holds only the CRDs of dir in its crds/.
func crdChart(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "portico", Version: "0.1.0"}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ch.Files = append(ch.Files, &common.File{Name: "crds/" + filepath.Base(f), Data: data})
	}
	return ch
}

// applyCRDs does what `kubectl apply --server-side [--force-conflicts] -f dir` does: a
// server-side apply of every CRD in dir as field manager "kubectl".
func (e *crdEnv) applyCRDs(ctx context.Context, dir string, force bool) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := e.dyn.Resource(crdCRDsGVR).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kubectl", Force: force}); err != nil {
			return fmt.Errorf("applying %s: %w", strings.TrimPrefix(f, crdRepo+"/"), err)
		}
	}
	return nil
}
