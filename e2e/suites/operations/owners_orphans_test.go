package operations_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/registry"
)

// TestOwnersOrphansCommand (issue 31 item 1): `portico-controller orphans` lists the Services
// an instance holds but no longer serves and deletes their load balancers only with --delete:
// never another instance's, never one with no recorded holder, never one it serves. The binary
// lists; the deletion runs in the test process (controllers.Orphans, what the binary runs) so
// that it reaches the provider the instance used. At 3e563f2 there was no such command (and the
// orphan's load balancer was already gone at the restart).
func TestOwnersOrphansCommand(t *testing.T) {
	e := ownersSetup(t)
	a := e.instance("portico", "198.18.164.0/24")
	a.start("keep", "gone")
	e.lb("served", "keep")
	e.lb("orphan", "gone")
	served, orphan := e.ready("served"), e.ready("orphan")
	a.start("keep") // class gone removed
	e.notServed("orphan")
	// Another instance's, and one from a Portico that recorded no holder, both of a class a
	// does not serve.
	e.lb("others", "gone", func(s *corev1.Service) {
		s.Finalizers = []string{service.Finalizer}
		s.Annotations = map[string]string{annotations.Owner: "elsewhere/portico", annotations.Provider: "test"}
	})
	e.lb("unrecorded", "gone", func(s *corev1.Service) { s.Finalizers = []string{service.Finalizer} })
	t.Cleanup(func() {
		for _, n := range []string{"others", "unrecorded"} {
			e.svcs.Update(n, func(s *corev1.Service) { s.Finalizers = nil })
		}
	})
	a.stop() // as after an uninstall: nobody serves the orphan

	cfg := config.DefaultOrphans(registry.NewConfigs())
	cfg.Controller = a.config("keep")
	run := func(del bool) string {
		t.Helper()
		cfg.Delete = del
		var out bytes.Buffer
		if err := controllers.Orphans(context.Background(), cfg, e.cl.Config(), ownersLogger(), &out, map[string]providers.Provider{"test": a.prov}); err != nil {
			t.Fatalf("orphans (delete %v): %v\n%s", del, err, out.String())
		}
		t.Logf("orphans (delete %v):\n%s", del, out.String())
		return out.String()
	}

	// Listing, by the binary.
	bin := gobuild.BinaryForTest(t, "cmd/portico-controller")
	args := []string{"orphans", "--kubeconfig=" + e.cl.KubeconfigPath(), "--class=" + ownersClass("keep") + "=reference",
		"--leader-election-namespace=" + e.ns, "--leader-election-id=" + a.name}
	listed, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("portico-controller orphans: %v\n%s", err, listed)
	}
	t.Logf("portico-controller orphans:\n%s", listed)
	for _, out := range []string{string(listed), run(false)} {
		lines := strings.Split(out, "\n")
		has := func(name string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, e.ns+"/"+name+" ") })
		}
		if !has("orphan") || !has("unrecorded") || has("served") || has("others") {
			t.Errorf("listing: want owners/orphan and owners/unrecorded (and nothing else), got\n%s", out)
		}
	}
	if n := a.deletes(); n != 0 || !a.has(orphan) {
		t.Fatalf("listing deleted: %d Delete calls, provider holds %v", n, a.prov.Refs())
	}
	e.unchanged(orphan, a.instanceName())

	// Deleting.
	if out := run(true); !strings.Contains(out, e.ns+"/orphan: load balancer deleted") {
		t.Errorf("--delete output lacks the orphan's deletion:\n%s", out)
	}
	if a.has(orphan) || a.deletes() != 1 {
		t.Errorf("after --delete: %d Delete calls (want 1), provider holds %v", a.deletes(), a.prov.Refs())
	}
	got := e.svcs.Get("orphan")
	if len(got.Finalizers) != 0 || ownersHolder(got) != "" || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("orphan after --delete: finalizers %v, annotations %v, status %+v", got.Finalizers, got.Annotations, got.Status)
	}
	e.unchanged(served, a.instanceName())
	if !a.has(served) {
		t.Error("the served Service's load balancer went")
	}
	for _, n := range []string{"others", "unrecorded"} {
		if s := e.svcs.Get(n); !slices.Equal(s.Finalizers, []string{service.Finalizer}) {
			t.Errorf("%s was touched: finalizers %v", n, s.Finalizers)
		}
	}
	if out := run(true); !strings.Contains(out, "owners/unrecorded") || strings.Contains(out, "owners/orphan ") {
		t.Errorf("second run: want only the unrecorded Service listed, got\n%s", out)
	}
}
