package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/portico-lb/portico/providers/registry"
)

func TestInstanceName(t *testing.T) {
	c, err := parse(t, "--class=portico-lb.io/a=reference", "--leader-election-namespace=lb", "--leader-election-id=edge")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.InstanceName(); got != "lb/edge" {
		t.Errorf("default instance name %q, want lb/edge", got)
	}
	c, err = parse(t, "--class=portico-lb.io/a=reference", "--instance=dev-laptop")
	if err != nil || c.InstanceName() != "dev-laptop" {
		t.Errorf("--instance: %q, %v", c.InstanceName(), err)
	}
	if _, err := parse(t, "--class=portico-lb.io/a=reference", "--leader-election-namespace=", "--leader-election-id=", "--leader-elect=false"); err == nil ||
		!strings.Contains(err.Error(), "config.instance") {
		t.Errorf("an empty instance name must be rejected, got %v", err)
	}
}

// TestOrphansConfig: the orphans command takes the controller's flags and file, and --delete;
// an instance serving no class any more is valid there (all its Services are orphans).
func TestOrphansConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("instance: lb/edge\nclasses: {portico-lb.io/a: reference}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		instance string
		classes  int
		del      bool
	}{
		{[]string{"--config=" + file}, "lb/edge", 1, false},
		{[]string{"--config=" + file, "--delete", "--instance=other"}, "other", 1, true},
		{[]string{"--leader-election-namespace=ns"}, "ns/portico-controller", 0, false},
	} {
		o := DefaultOrphans(registry.NewConfigs())
		fs := pflag.NewFlagSet("orphans", pflag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(fs); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if o.InstanceName() != tc.instance || len(o.Classes) != tc.classes || o.Delete != tc.del {
			t.Errorf("%v: instance %q classes %v delete %v", tc.args, o.InstanceName(), o.Classes, o.Delete)
		}
	}
}
