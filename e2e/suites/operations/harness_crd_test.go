package operations

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/e2e/framework/cluster"
)

// crdRepo is the repository's root, seen from this package.
var crdRepo = filepath.Join("..", "..", "..")

// crdDir holds the CRDs the chart installs (deploy/crds, copied into the chart by make chart).
var crdDir = filepath.Join(crdRepo, "deploy", "chart", "portico", "crds")

var (
	crdPoolsGVR = schema.GroupVersionResource{Group: "portico-lb.io", Version: "v1alpha1", Resource: "addresspools"}
	crdPeersGVR = schema.GroupVersionResource{Group: "portico-lb.io", Version: "v1alpha1", Resource: "bgppeers"}
	crdCRDsGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// crdEnv is the fixture of the CRD tests: a control plane of their own and a dynamic client.
type crdEnv struct {
	t   *testing.T
	c   *cluster.Cluster
	dyn dynamic.Interface
}

// crdStart starts a control plane (no controllers) and installs the CRDs in dir ("": none).
func crdStart(t *testing.T, dir string) *crdEnv {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	if dir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.InstallCRDs(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	return &crdEnv{t: t, c: c, dyn: dyn}
}

// create creates a cluster-scoped AddressPool or BGPPeer (a server-side dry run with dryRun).
func (e *crdEnv) create(ctx context.Context, kind, name string, spec map[string]any, dryRun bool) (*unstructured.Unstructured, error) {
	gvr := crdPoolsGVR
	if kind == "BGPPeer" {
		gvr = crdPeersGVR
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "portico-lb.io/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return e.dyn.Resource(gvr).Create(ctx, u, opts)
}

// crdObject is an AddressPool or BGPPeer found in one of the repository's files.
type crdObject struct {
	file, kind, name string
	spec             map[string]any
}

// crdRepoObjects reads the AddressPools and BGPPeers the repository shows users: manifests
// (every document of such a kind) and chart values files (addressPools and bgpPeers).
func crdRepoObjects(t *testing.T) []crdObject {
	t.Helper()
	manifests := []string{"deploy/samples.yaml", "migrate/metallb/testdata/config.golden.yaml"}
	values := []string{"deploy/manifests-values.yaml", "deploy/chart/portico/values.yaml"}
	examples, err := filepath.Glob(filepath.Join(crdRepo, "docs", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range examples {
		rel, _ := filepath.Rel(crdRepo, f)
		values = append(values, rel)
	}
	var out []crdObject
	for _, f := range manifests {
		data, err := os.ReadFile(filepath.Join(crdRepo, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			u := unstructured.Unstructured{Object: doc}
			if kind := u.GetKind(); strings.HasPrefix(u.GetAPIVersion(), "portico-lb.io/") && (kind == "AddressPool" || kind == "BGPPeer") {
				spec, _, _ := unstructured.NestedMap(doc, "spec")
				out = append(out, crdObject{file: f, kind: kind, name: u.GetName(), spec: spec})
			}
		}
	}
	for _, f := range values {
		data, err := os.ReadFile(filepath.Join(crdRepo, f))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			AddressPools []struct {
				Name string         `json:"name"`
				Spec map[string]any `json:"spec"`
			} `json:"addressPools"`
			BGPPeers []struct {
				Name string         `json:"name"`
				Spec map[string]any `json:"spec"`
			} `json:"bgpPeers"`
		}
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range v.AddressPools {
			out = append(out, crdObject{file: f, kind: "AddressPool", name: p.Name, spec: p.Spec})
		}
		for _, p := range v.BGPPeers {
			out = append(out, crdObject{file: f, kind: "BGPPeer", name: p.Name, spec: p.Spec})
		}
	}
	return out
}
