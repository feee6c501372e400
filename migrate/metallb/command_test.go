package metallb

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestOfflineDryRun runs the command as `migrate metallb -f FILE --dry-run` does: it contacts
// no cluster, prints YAML on out and the report on the other writer, and says when a write
// would be refused.
func TestOfflineDryRun(t *testing.T) {
	lossy := filepath.Join(t.TempDir(), "lossy.yaml")
	if err := os.WriteFile(lossy, []byte(pool+"  serviceAllocation:\n    serviceSelectors: [{matchLabels: {a: b}}, {matchLabels: {c: d}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		err     string
		inYAML  string
		inReprt string
	}{
		{name: "clean", args: []string{"-f", "testdata/config.yaml", "--dry-run"}, inYAML: "name: routed", inReprt: "services: not checked"},
		{name: "lossy", args: []string{"-f", lossy, "--dry-run"}, err: "a write would be refused", inYAML: "kind: AddressPool", inReprt: "LOSSY IPAddressPool metallb-system/p spec.serviceAllocation.serviceSelectors"},
		{name: "lossy allowed", args: []string{"-f", lossy, "--dry-run", "--allow-lossy"}, inYAML: "kind: AddressPool"},
		{name: "other namespace is empty", args: []string{"-f", "testdata/config.yaml", "--dry-run", "-n", "elsewhere"}, err: "no MetalLB resources found in namespace elsewhere"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultCommand()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			c.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			var out, report bytes.Buffer
			err := c.Run(context.Background(), &out, &report)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if !strings.Contains(out.String(), tc.inYAML) {
				t.Errorf("YAML lacks %q:\n%s", tc.inYAML, out.String())
			}
			if !strings.Contains(report.String(), tc.inReprt) {
				t.Errorf("report lacks %q:\n%s", tc.inReprt, report.String())
			}
		})
	}
}

func TestValidate(t *testing.T) {
	c := DefaultCommand()
	c.Namespace, c.Files = "Bad_NS", []string{""}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--namespace") || !strings.Contains(err.Error(), "--filename") {
		t.Fatalf("err = %v, want both problems", err)
	}
}
