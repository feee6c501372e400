package configref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

// TestReferenceUpToDate: docs/configuration.md is what Markdown renders from the flag sets and
// the chart.
func TestReferenceUpToDate(t *testing.T) {
	want, err := Markdown(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, Path))
	if err != nil {
		t.Fatalf("%v; generate it with: %s", err, RegenerateCommand)
	}
	if string(got) != want {
		t.Errorf("%s is stale (a flag or a chart value changed); regenerate it with: %s", Path, RegenerateCommand)
	}
}

// TestReferenceContent: the reference lists what users look up, with the file keys found.
func TestReferenceContent(t *testing.T) {
	md, err := Markdown(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `--class` | string |  | `classes` |",
		"| `--resync-period` | duration | `10m0s` | `resyncPeriod` |",
		"| `--aws-region` | string |  | `providers.aws.region` |",
		"| `--aws-extra-tags` | string |  | `providers.aws.extraTags` |",
		"| `--reference-pool` | string | `198.18.128.0/24` | `providers.reference.pool` |",
		"| `--proxy-mode` | string | `nftables` | `mode` |",
		"| `--daemonset` | string |  | `daemonSet`, `bgp.daemonSet` |",
		"| `--membership-restart-hold` | duration | `15s` | `membership.restartHold` |",
		"| `--delete` |",
		"| `-n`, `--namespace` | string | `metallb-system` |",
		"| `aws.region` | `--aws-region` |",
		"| `--logging-format` |",
		"| `agent.apiServer` | string | `\"\"` |",
		"| `controller.classes` | map of one of `aws`, `baremetal`, `reference` | `{}` |",
		"`--node-name` (",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	if strings.Contains(md, "| `--config` | string |  | `") {
		t.Error("--config has a file key")
	}
}

func TestChangedKey(t *testing.T) {
	a := map[string]any{"x": 1.0, "m": map[string]any{"a": "b"}}
	for _, tc := range []struct {
		b    map[string]any
		want string
	}{
		{map[string]any{"x": 1.0, "m": map[string]any{"a": "b"}}, ""},
		{map[string]any{"x": 2.0, "m": map[string]any{"a": "b"}}, "x"},
		{map[string]any{"x": 1.0, "m": map[string]any{"a": "c"}}, "m.a"},
		{map[string]any{"x": 1.0, "m": map[string]any{"a": "b", sentinelKey: "v"}}, "m"},
		{map[string]any{"x": 1.0, "m": map[string]any{"a": "b"}, "n": true}, "n"},
	} {
		if got := changedKey(a, tc.b, ""); got != tc.want {
			t.Errorf("changedKey(%v) = %q, want %q", tc.b, got, tc.want)
		}
	}
}
