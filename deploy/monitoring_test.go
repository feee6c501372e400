package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// monitoringValues are baseValues with every monitoring object on.
func monitoringValues() map[string]any {
	v := baseValues()
	with(v, "agent.metricsBindAddress", "0.0.0.0:9120")
	with(v, "agent.podMonitor", map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "kube-prometheus"}})
	with(v, "controller.serviceMonitor", map[string]any{"enabled": true, "interval": "20s", "labels": map[string]any{"release": "kube-prometheus"}})
	with(v, "prometheusRule", map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}, "poolUsageThreshold": 0.9})
	return v
}

// TestPrometheusRuleMetricsExist: every metric an alert of the chart's PrometheusRule reads is
// one the code exports (a metric name the Go source of the binaries builds: a renamed metric
// fails here), and the rule has the alerts issue 29 asks for.
func TestPrometheusRuleMetricsExist(t *testing.T) {
	// The extraction keeps metric names and drops functions, label names, label values,
	// ranges, numbers and keywords.
	got := promQLMetrics(`max by (pool, family) (a_b{state="x_y"} / ignoring (state) (c{s=~"alive|dead"} + on (p) group_left (q) d)) > 0.9
	and increase(e_total[10m]) > 0 or time() - f_seconds offset 5m unless sum without (x) (rate(g_bucket[5m])) > bool 1`)
	want := []string{"a_b", "c", "d", "e_total", "f_seconds", "g_bucket"}
	if !slices.Equal(got, want) {
		t.Errorf("promQLMetrics = %v, want %v", got, want)
	}
	objs := mustRender(t, monitoringValues())
	rule, ok := objs["PrometheusRule/portico"]
	if !ok {
		t.Fatalf("no PrometheusRule/portico rendered (have %v)", slices.Sorted(mapKeys(objs)))
	}
	if got := rule.GetLabels()["release"]; got != "kube-prometheus" {
		t.Errorf("PrometheusRule label release = %q, want prometheusRule.labels' kube-prometheus", got)
	}
	exported := exportedMetricNames(t)
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := map[string]string{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			name, _ := r["alert"].(string)
			expr, _ := r["expr"].(string)
			alerts[name] = expr
			names := promQLMetrics(expr)
			if len(names) == 0 {
				t.Errorf("alert %s reads no metric: %q", name, expr)
			}
			for _, m := range names {
				if !exported[m] && !exported[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")] {
					t.Errorf("alert %s reads %s, which no binary exports", name, m)
				}
			}
		}
	}
	for _, want := range []string{"PorticoAddressPoolUsageHigh", "PorticoAddressPoolExhausted", "PorticoBGPSessionDown",
		"PorticoBFDSessionDown", "PorticoAgentSyncStale", "PorticoAgentSyncFailing", "PorticoMembershipSplit"} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("no alert %s (have %v)", want, slices.Sorted(mapKeys(alerts)))
		}
	}
	if e := alerts["PorticoAddressPoolUsageHigh"]; !strings.Contains(e, "> 0.9") {
		t.Errorf("PorticoAddressPoolUsageHigh ignores prometheusRule.poolUsageThreshold: %q", e)
	}
	if e := alerts["PorticoAgentSyncFailing"]; !strings.Contains(e, "portico_agent_sync_proxy_rules_full_fallbacks_total") {
		t.Errorf("PorticoAgentSyncFailing does not read the full-sync fallbacks: %q", e)
	}
	// The check itself: a name the code does not build is not taken for one.
	for _, m := range []string{"portico_agent_bgp_session_up", "portico_pool_addresses"} {
		if exported[m] {
			t.Errorf("%s taken for an exported metric", m)
		}
	}
}

var (
	promQLString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promQLMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promQLRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promQLNumber   = regexp.MustCompile(`\b[0-9][0-9.]*[a-z]*`) // 0.9, 5m
	promQLLabels   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promQLIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promQLKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// promQLMetrics are the metric names a PromQL expression reads, in order: the identifiers left
// once strings, label matchers, ranges, numbers and durations and label lists are dropped, other than functions and
// keywords.
func promQLMetrics(expr string) []string {
	s := promQLString.ReplaceAllString(expr, `""`)
	s = promQLMatchers.ReplaceAllString(s, "")
	s = promQLRange.ReplaceAllString(s, "")
	s = promQLNumber.ReplaceAllString(s, "")
	s = promQLLabels.ReplaceAllString(s, "")
	var out []string
	for _, id := range promQLIdent.FindAllString(s, -1) {
		if strings.HasSuffix(id, "(") || promQLKeywords[id] || slices.Contains(out, id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// exportedMetricNames are the metric names the module's Go code (not tests, not e2e/) builds:
// every string constant expression, folded with the package's string constants (so
// metricsPrefix + "session_state" is portico_agent_bgp_session_state), that looks like a
// metric name.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	metricName := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
	pkgs := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "e2e" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range pkgs {
		consts := map[string]string{}
		var fold func(e ast.Expr) (string, bool)
		fold = func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				if e.Kind == token.STRING {
					s, err := strconv.Unquote(e.Value)
					return s, err == nil
				}
			case *ast.Ident:
				s, ok := consts[e.Name]
				return s, ok
			case *ast.ParenExpr:
				return fold(e.X)
			case *ast.BinaryExpr:
				if e.Op == token.ADD {
					a, ok1 := fold(e.X)
					b, ok2 := fold(e.Y)
					return a + b, ok1 && ok2
				}
			}
			return "", false
		}
		// Constants may use constants declared after them: fold until nothing new.
		for changed := true; changed; {
			changed = false
			for _, f := range files {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST {
						continue
					}
					for _, spec := range g.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i >= len(vs.Values) {
								continue
							}
							if _, known := consts[n.Name]; known {
								continue
							}
							if s, ok := fold(vs.Values[i]); ok {
								consts[n.Name], changed = s, true
							}
						}
					}
				}
			}
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if s, ok := fold(e); ok && metricName.MatchString(s) {
						names[s] = true
					}
				}
				return true
			})
		}
	}
	return names
}

// TestMonitors: the PodMonitor and ServiceMonitor render only when enabled and scrape what the
// pods and Service expose; the agent's metrics port is named only off loopback, and a
// PodMonitor over a loopback address is refused naming the value.
func TestMonitors(t *testing.T) {
	for key := range mustRender(t, baseValues()) {
		if k, _, _ := strings.Cut(key, "/"); k == "PodMonitor" || k == "ServiceMonitor" || k == "PrometheusRule" {
			t.Errorf("%s rendered by default", key)
		}
	}
	ds := typed[appsv1.DaemonSet](t, mustRender(t, baseValues()), "DaemonSet/portico-agent")
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			t.Errorf("the agent's metrics port is named while it binds 127.0.0.1: %+v", p)
		}
	}

	objs := mustRender(t, monitoringValues())
	ds = typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent")
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
		return p.Name == "metrics" && p.ContainerPort == 9120
	}) {
		t.Errorf("agent ports %+v: want metrics 9120", ds.Spec.Template.Spec.Containers[0].Ports)
	}
	cfg := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-agent")
	if c := cfg.Data["config.yaml"]; !strings.Contains(c, "metricsBindAddress: 0.0.0.0:9120") && !strings.Contains(c, `metricsBindAddress: "0.0.0.0:9120"`) {
		t.Errorf("agent configuration:\n%s\nwant metricsBindAddress: 0.0.0.0:9120", cfg.Data["config.yaml"])
	}
	pm := objs["PodMonitor/portico-agent"]
	if pm == nil {
		t.Fatal("no PodMonitor/portico-agent")
	}
	if pm.GetAPIVersion() != "monitoring.coreos.com/v1" || pm.GetNamespace() != namespace || pm.GetLabels()["release"] != "kube-prometheus" {
		t.Errorf("PodMonitor %s in %q, labels %v", pm.GetAPIVersion(), pm.GetNamespace(), pm.GetLabels())
	}
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%s; the agent pods have %v", k, v, ds.Spec.Template.Labels)
		}
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" || eps[0].(map[string]any)["interval"] != "15s" {
		t.Errorf("PodMonitor endpoints %v, want port metrics every 15s", eps)
	}

	sm := objs["ServiceMonitor/portico-controller"]
	if sm == nil {
		t.Fatal("no ServiceMonitor/portico-controller")
	}
	svc := typed[corev1.Service](t, objs, "Service/portico-controller-metrics")
	sel, _, _ = unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has %v", k, v, svc.Labels)
		}
	}
	eps, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name || eps[0].(map[string]any)["interval"] != "20s" {
		t.Errorf("ServiceMonitor endpoints %v, want port %s every 20s", eps, svc.Spec.Ports[0].Name)
	}
	if sm.GetLabels()["release"] != "kube-prometheus" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}

	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"podMonitor on loopback": {with(baseValues(), "agent.podMonitor.enabled", true), "agent.metricsBindAddress"},
		"serviceMonitor without the Service": {with(with(baseValues(), "controller.serviceMonitor.enabled", true), "controller.metrics.service", false),
			"controller.metrics.service"},
		"bad interval": {with(baseValues(), "agent.podMonitor.interval", "often"), "interval"},
	} {
		if _, err := render(loadChart(t), tc.vals, renderOpts{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, tc.want)
		}
	}
}
