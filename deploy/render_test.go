package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the rendered manifests in deploy/ from the chart (make chart)")

const (
	chartDir = "chart/portico"
	// namespace is where the plain manifests install (the tests' clusters use it too).
	namespace = "kube-system"
)

// loadChart loads the chart from its directory.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// readValues reads a values file.
func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// renderOpts are a render's release and cluster.
type renderOpts struct {
	upgrade bool
	lookup  engine.ClientProvider // nil: no cluster (helm template)
}

// render renders the chart with vals as `helm install` (or upgrade) would, schema checked:
// template name -> manifest, empty ones dropped.
func render(ch *chart.Chart, vals map[string]any, o renderOpts) (map[string]string, error) {
	rel := common.ReleaseOptions{Name: "portico", Namespace: namespace, Revision: 1, IsInstall: !o.upgrade, IsUpgrade: o.upgrade}
	if o.upgrade {
		rel.Revision = 2
	}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, rel, common.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if o.lookup != nil {
		out, err = engine.RenderWithClientProvider(ch, rv, o.lookup)
	} else {
		out, err = engine.Render(ch, rv)
	}
	if err != nil {
		return nil, err
	}
	for name, m := range out {
		if strings.TrimSpace(stripComments(m)) == "" || path.Ext(name) != ".yaml" {
			delete(out, name)
		}
	}
	return out, nil
}

// stripComments drops YAML comment lines and document separators.
func stripComments(m string) string {
	var b strings.Builder
	for _, line := range strings.Split(m, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// manifestFiles maps the chart's templates to the plain manifests in deploy/.
var manifestFiles = map[string]string{
	"templates/agent/":                "agent.yaml",
	"templates/controller/rbac.yaml":  "controller/rbac.yaml",
	"templates/controller/deployment": "controller/deployment.yaml",
	"templates/ccm/rbac.yaml":         "ccm/rbac.yaml",
	"templates/ccm/deployment":        "ccm/deployment.yaml",
	"templates/samples/":              "samples.yaml",
}

const header = "# Rendered from deploy/chart/portico with deploy/manifests-values.yaml by `make chart`; edit those,\n# not this file.\n"

// renderManifests renders the plain manifests: deploy/ path -> content.
func renderManifests(t *testing.T) map[string]string {
	t.Helper()
	out, err := render(loadChart(t), readValues(t, "manifests-values.yaml"), renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{}
	// RBAC first in each file, so that applying a file in order creates the accounts first.
	names := slices.Sorted(mapKeys(out))
	slices.SortStableFunc(names, func(a, b string) int {
		ra, rb := strings.HasSuffix(a, "/rbac.yaml"), strings.HasSuffix(b, "/rbac.yaml")
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	for _, name := range names {
		rel := strings.TrimPrefix(name, "portico/")
		file := ""
		for prefix, f := range manifestFiles {
			if strings.HasPrefix(rel, prefix) {
				file = f
			}
		}
		if file == "" {
			t.Fatalf("template %s renders to no file of deploy/ (add it to manifestFiles)", rel)
		}
		files[file] = append(files[file], strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out[name]), "---")))
	}
	res := map[string]string{}
	for f, docs := range files {
		res[f] = header + strings.Join(docs, "\n---\n") + "\n"
	}
	return res
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestRenderedManifests keeps the plain manifests in deploy/ and the chart's CRDs in sync with
// their sources; -update rewrites them.
func TestRenderedManifests(t *testing.T) {
	want := renderManifests(t)
	for _, f := range slices.Sorted(mapKeys(want)) {
		if *update {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(want[f]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%v: run make chart", err)
			continue
		}
		if string(got) != want[f] {
			t.Errorf("deploy/%s differs from the chart's rendering: run make chart\n%s", f, firstDiff(string(got), want[f]))
		}
	}
	// The CRDs: generated from api/ into deploy/crds (make generate), copied into the chart.
	crds, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in deploy/crds: %v", err)
	}
	inChart, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	for _, src := range crds {
		dst := filepath.Join(chartDir, "crds", filepath.Base(src))
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(dst, a, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: run make chart", dst, src)
		}
	}
	if !*update && len(inChart) != len(crds) {
		t.Errorf("the chart holds %d CRDs, deploy/crds %d", len(inChart), len(crds))
	}
}

// firstDiff describes the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  file:  %q\n  chart: %q", i+1, x, y)
		}
	}
	return ""
}
