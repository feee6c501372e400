package install

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// TestValuesFitTheChart: what Portico installs with passes the chart's schema and renders, for
// each kind of Options a suite asks for (so a renamed value fails here, not in a cluster).
func TestValuesFitTheChart(t *testing.T) {
	ch, err := loader.Load(ChartDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := netip.MustParsePrefix("198.18.221.0/28")
	for name, tc := range map[string]struct {
		opts Options
		want []string // substrings of the rendered manifests
		not  []string
	}{
		"default": {Options{Tag: "e2e-x", Pool: pool}, []string{"portico.invalid/portico-lb/portico-agent:e2e-x", "server: https://198.19.0.254:6443", "announce: [\"l2\"]", "198.18.221.0/28", "imagePullPolicy: Never"}, nil},
		"from a registry": {Options{Tag: "e2e-x", Pool: pool, Registry: "198.19.0.254:5000/portico"},
			[]string{"image: 198.19.0.254:5000/portico/portico-agent:e2e-x", "image: 198.19.0.254:5000/portico/portico-controller:e2e-x", "imagePullPolicy: IfNotPresent"}, []string{"imagePullPolicy: Never"}},
		"controller only": {Options{Tag: "e2e-x", NoAgent: true}, []string{"portico-controller:e2e-x"}, []string{"kind: DaemonSet"}},
		"nftables, bgp, classless": {Options{Tag: "e2e-x", ProxyMode: "nftables", Announce: []string{"bgp"}, Pool: pool, Classless: true},
			[]string{"mode: nftables", "announce: [\"bgp\"]", "classlessProvider: baremetal", "bgp: {}"}, []string{"membership:"}},
		"extra values": {Options{Tag: "e2e-x", Values: map[string]any{"controller": map[string]any{"replicas": 1}, "ignoreExcludeLB": true}},
			[]string{"replicas: 1", "ignoreExcludeLB: true", "portico-lb.io/baremetal: baremetal"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			vals := values("https://198.19.0.254:6443", []string{"198.19.1.0/24", "198.19.2.0/24"}, tc.opts)
			rel := common.ReleaseOptions{Name: DefaultRelease, Namespace: DefaultNamespace, Revision: 1, IsInstall: true}
			rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, rel, common.DefaultCapabilities, false)
			if err != nil {
				t.Fatalf("the chart refuses the values: %v", err)
			}
			out, err := engine.Render(ch, rv)
			if err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			for _, m := range out {
				all.WriteString(m)
			}
			for _, w := range tc.want {
				if !strings.Contains(all.String(), w) {
					t.Errorf("rendered manifests lack %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(all.String(), w) {
					t.Errorf("rendered manifests hold %q", w)
				}
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base := map[string]any{"a": map[string]any{"b": 1, "c": 2}, "d": 3}
	got := Merge(base, map[string]any{"a": map[string]any{"c": 4}, "d": []any{5}})
	a := got["a"].(map[string]any)
	if a["b"] != 1 || a["c"] != 4 || len(got["d"].([]any)) != 1 {
		t.Errorf("Merge = %v", got)
	}
	if base["a"].(map[string]any)["c"] != 2 {
		t.Errorf("Merge changed its input: %v", base)
	}
}

// TestOnlyStillExists: only Helm's early "still exists" report of its delete wait is waited
// out; a timeout, a failed hook or a failed deletion stays an error of Uninstall.
func TestOnlyStillExists(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"uninstallation completed with 1 error(s): resource Deployment/kube-system/portico-controller still exists. status: InProgress, message: Terminating", true},
		{"uninstallation completed with 2 error(s): resource Deployment/kube-system/portico-controller still exists. status: InProgress, message: Terminating; context deadline exceeded", false},
		{"uninstallation completed with 2 error(s): resource DaemonSet/kube-system/portico-agent still exists. status: InProgress, message: x; post-delete hook portico-cleanup failed", false},
		{"failed to delete release: portico", false},
	} {
		if got := onlyStillExists(errors.New(tc.msg)); got != tc.want {
			t.Errorf("onlyStillExists(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
