package metallb

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// FieldManager is the server-side apply field manager of the objects the command writes.
const FieldManager = "portico-migrate-metallb"

var (
	poolsGVR = v1alpha1.GroupVersion.WithResource("addresspools")
	peersGVR = v1alpha1.GroupVersion.WithResource("bgppeers")
)

type applyItem struct {
	gvr  schema.GroupVersionResource
	name string
	body []byte
}

// Objects returns the converted objects as the API server receives them (no status, no
// creation timestamp), pools first.
func (r *Result) Objects() ([]map[string]any, error) {
	var out []map[string]any
	add := func(obj any) error {
		raw, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		delete(m, "status")
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		out = append(out, m)
		return nil
	}
	for i := range r.Pools {
		if err := add(&r.Pools[i]); err != nil {
			return nil, fmt.Errorf("encoding AddressPool %s: %w", r.Pools[i].Name, err)
		}
	}
	for i := range r.Peers {
		if err := add(&r.Peers[i]); err != nil {
			return nil, fmt.Errorf("encoding BGPPeer %s: %w", r.Peers[i].Name, err)
		}
	}
	return out, nil
}

// Apply writes the converted objects with server-side apply. Every object is first applied as
// a server-side dry run, so the API server validates all of them (schema, CEL rules, a
// conflicting owner of the same fields) before any is written: a bad object means nothing is
// written. It then applies each for real and returns the names written.
func Apply(ctx context.Context, client dynamic.Interface, r *Result) ([]string, error) {
	objs, err := r.Objects()
	if err != nil {
		return nil, err
	}
	var items []applyItem
	for _, obj := range objs {
		body, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding object: %w", err)
		}
		gvr := poolsGVR
		if obj["kind"] == "BGPPeer" {
			gvr = peersGVR
		}
		name, _ := obj["metadata"].(map[string]any)["name"].(string)
		items = append(items, applyItem{gvr: gvr, name: name, body: body})
	}
	var problems []string
	for _, it := range items {
		if err := apply(ctx, client, it, true); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: append([]string{"the API server refused the converted objects in a dry run; nothing was written:"}, problems...)}
	}
	var written []string
	for _, it := range items {
		if err := apply(ctx, client, it, false); err != nil {
			return written, fmt.Errorf("after writing %v: %w", written, err)
		}
		written = append(written, it.gvr.Resource+"/"+it.name)
	}
	return written, nil
}

func apply(ctx context.Context, client dynamic.Interface, it applyItem, dryRun bool) error {
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := client.Resource(it.gvr).Patch(ctx, it.name, types.ApplyPatchType, it.body, opts); err != nil {
		return fmt.Errorf("applying %s %s: %w", it.gvr.Resource, it.name, err)
	}
	return nil
}
