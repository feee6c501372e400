package conformance

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/conformance"
	"github.com/portico-lb/portico/internal/prereq"
)

// TestPorticoPassesFastSelection: every spec of the fast selection passes with Portico's
// agent as the service proxy and its controller as the LoadBalancer implementation, all the
// specs the selection pins ran, no suite node failed and ginkgo exited 0.
func TestPorticoPassesFastSelection(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables, prereq.Containerd, prereq.Runc, prereq.CNIPlugins)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	bins, err := conformance.Build(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	imgDir := filepath.Join(dir, "images")
	if err := os.Mkdir(imgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	imgs, err := conformance.BuildImages(ctx, imgDir, bins, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	r := conformance.RunColumn(ctx, conformance.PorticoColumn, conformance.ColumnOptions{
		Binaries: bins, Images: imgs, Selection: conformance.Fast, Dir: dir, Procs: 3,
		Install: conformance.InstallPortico(t.Logf), Logf: t.Logf,
	})
	t.Logf("results (%s; cluster and install %s):\n%s", r.Took.Round(time.Second), r.Setup.Round(time.Second), conformance.Table([]conformance.ColumnResult{r}))
	if r.Err != nil {
		t.Fatalf("the column did not complete: %v", r.Err)
	}
	for _, p := range r.Incomplete() {
		t.Error(p)
	}
	for _, s := range r.Specs {
		if !s.Passed() {
			t.Errorf("%s: %s at %s: %s", s.Name, s.State, s.Location, s.Message)
		}
	}
	if t.Failed() {
		log, _ := os.ReadFile(filepath.Join(dir, "Portico", "ginkgo.log"))
		t.Logf("ginkgo's output (last 20000 bytes):\n%s", tail(log, 20000))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
