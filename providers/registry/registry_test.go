package registry

import (
	"context"
	"flag"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/reference"
)

func TestNamesAreUniqueAndSorted(t *testing.T) {
	names := Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("names not unique and sorted: %v", names)
		}
	}
	if !Known("reference") || Known("gce") {
		t.Errorf("Known: reference=%v gce=%v", Known("reference"), Known("gce"))
	}
}

func TestConfigsFromFileAndFlags(t *testing.T) {
	c := NewConfigs()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.BindFlags(fs)
	if fs.Lookup("reference-pool") == nil {
		t.Fatal("--reference-pool not registered")
	}
	var holder struct {
		Providers Configs `json:"providers"`
	}
	holder.Providers = c
	if err := yaml.Unmarshal([]byte("providers:\n  reference:\n    pool: 198.18.7.0/24\n"), &holder); err != nil {
		t.Fatal(err)
	}
	ref := c["reference"].(*reference.Config)
	if ref.Pool != "198.18.7.0/24" {
		t.Errorf("pool from file = %q", ref.Pool)
	}
	if err := fs.Parse([]string{"--reference-pool=198.18.8.0/24"}); err != nil {
		t.Fatal(err)
	}
	if ref.Pool != "198.18.8.0/24" {
		t.Errorf("pool after the flag = %q", ref.Pool)
	}
	p, err := c.Build(context.Background(), []string{"reference", ""}, providers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p["reference"] == nil {
		t.Fatalf("built %v", p)
	}
}

func TestConfigsRejectUnknownProvidersAndKeys(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`{"gce": {}}`, `unknown provider "gce"`},
		{`{"reference": {"pol": "x"}}`, `unknown field "pol"`},
	} {
		err := NewConfigs().UnmarshalJSON([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.doc, err, tt.want)
		}
	}
	if _, err := NewConfigs().Build(context.Background(), []string{"gce"}, providers.Env{}); err == nil {
		t.Error("Build of an unknown provider succeeded")
	}
}

func TestValidateChecksProvidersInUseOrChanged(t *testing.T) {
	root := field.NewPath("providers")
	c := NewConfigs()
	if errs := c.Validate(root, []string{"reference"}); len(errs) != 0 {
		t.Errorf("defaults invalid: %v", errs)
	}
	if err := c.UnmarshalJSON([]byte(`{"reference": {"pool": "nope"}}`)); err != nil {
		t.Fatal(err)
	}
	// Not in use, but changed from its defaults: still checked.
	errs := c.Validate(root, nil)
	if len(errs) != 1 || errs[0].Field != "providers.reference.pool" {
		t.Errorf("errors = %v, want one at providers.reference.pool", errs)
	}
}
