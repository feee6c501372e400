package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Apply creates every object of a multi-document YAML manifest with strict field validation;
// objects of dryRunKinds (e.g. workloads nothing here would run) as a server-side dry run only.
// Objects that already exist are left as they are.
func (c *Cluster) Apply(ctx context.Context, path string, dryRunKinds ...string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config())
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, gvk, err)
		}
		opts := metav1.CreateOptions{FieldValidation: "Strict"}
		if slices.Contains(dryRunKinds, gvk.Kind) {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(ctx, obj, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating %s %s: %w", path, gvk.Kind, obj.GetName(), err)
		}
	}
}

// InstallCRDs applies every manifest in dir (Portico's deploy/crds) and waits until each
// CustomResourceDefinition is Established and its resources are in the API server's discovery,
// so that they can be used at once, also by clients that map kinds through discovery (the
// discovery documents are updated after Established, later on a busy machine).
func (c *Cluster) InstallCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD manifests in %s (%v)", dir, err)
	}
	for _, f := range files {
		if err := c.Apply(ctx, f); err != nil {
			return err
		}
	}
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config())
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := crds.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, crd := range list.Items {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established || !discovered(dc, crd) {
				return false, nil
			}
		}
		return true, nil
	})
}

// discovered reports whether discovery lists crd's resource in each version it serves.
func discovered(dc discovery.DiscoveryInterface, crd unstructured.Unstructured) bool {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		name, _ := m["name"].(string)
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + name)
		if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
			return false
		}
	}
	return true
}
