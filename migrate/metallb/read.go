package metallb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// DefaultNamespace is where MetalLB is installed by default.
const DefaultNamespace = "metallb-system"

// ReadFiles reads MetalLB resources of namespace from YAML or JSON files (several documents per
// file, and kind: List, are fine). A document that does not parse is an error naming the file
// and the document.
func ReadFiles(paths []string, namespace string) (Input, error) {
	var in Input
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return Input{}, fmt.Errorf("reading MetalLB resources: %w", err)
		}
		if err := readDocuments(&in, data, path, namespace); err != nil {
			return Input{}, err
		}
	}
	return in, nil
}

func readDocuments(in *Input, data []byte, path, namespace string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s #%d: %w", path, doc, err)
		}
		if obj == nil {
			continue // an empty document
		}
		source := fmt.Sprintf("%s #%d", path, doc)
		if kind, _ := obj["kind"].(string); kind == "List" || (len(kind) > 4 && kind[len(kind)-4:] == "List") {
			items, _ := obj["items"].([]any)
			for i, item := range items {
				m, ok := item.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: items[%d] is not an object", source, i)
				}
				if err := in.Add(m, namespace, fmt.Sprintf("%s items[%d]", source, i)); err != nil {
					return err
				}
			}
			continue
		}
		if err := in.Add(obj, namespace, source); err != nil {
			return err
		}
	}
}

// resources are the MetalLB resources read from a cluster, each at the versions tried in order.
var resources = []struct {
	resource string
	versions []string
}{
	{"ipaddresspools", []string{"v1beta1"}},
	{"l2advertisements", []string{"v1beta1"}},
	{"bgpadvertisements", []string{"v1beta1"}},
	{"bgppeers", []string{"v1beta2", "v1beta1"}},
	{"communities", []string{"v1beta1"}},
	{"bfdprofiles", []string{"v1beta1"}},
}

// ReadCluster lists MetalLB's resources in namespace. A resource the cluster does not serve
// (MetalLB's CRDs not installed) is an error, since a partial read would convert a partial
// configuration.
func ReadCluster(ctx context.Context, client dynamic.Interface, namespace string) (Input, error) {
	var in Input
	for _, r := range resources {
		var lastErr error
		read := false
		for _, v := range r.versions {
			gvr := schema.GroupVersionResource{Group: Group, Version: v, Resource: r.resource}
			list, err := client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				lastErr = err
				continue
			}
			if err != nil {
				return Input{}, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
			}
			for i := range list.Items {
				item := list.Items[i].Object
				src := fmt.Sprintf("cluster %s", gvr.GroupResource())
				if err := in.Add(item, namespace, src); err != nil {
					return Input{}, err
				}
			}
			read = true
			break
		}
		if !read {
			return Input{}, fmt.Errorf("listing %s.%s: %w (are MetalLB's CRDs installed?)", r.resource, Group, lastErr)
		}
	}
	return in, nil
}
