package baremetal

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// TestInformerSource: portico-ccm's own AddressPool informer lists the pools once synced and
// follows later changes. (The informer is client-go's; the fake client stands in for the API
// server at this seam; e2e runs the manager-cache path against the real one.)
func TestInformerSource(t *testing.T) {
	// The fake client cannot stream a watch list's initial events; the API server can.
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	first := apool("first", 0, "198.18.7.0/30")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&first).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := newInformerSource(ctx, c)

	names := func() []string {
		pools, err := src.AddressPools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pools {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(); len(got) != 1 || got[0] != "first" {
		t.Fatalf("pools after sync = %v, want [first]", got)
	}
	second := v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Spec: v1alpha1.AddressPoolSpec{Addresses: []string{"198.18.8.0/30"}}}
	if err := c.Create(ctx, &second); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &first); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		got := names()
		return len(got) == 1 && got[0] == "second", nil
	})
	if err != nil {
		t.Fatalf("pools = %v, want [second] after a create and a delete", names())
	}
}
