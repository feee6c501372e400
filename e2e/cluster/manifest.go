package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
