package k8sbin

import (
	"slices"
	"strings"
	"testing"
)

func TestRelativeReplaces(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.26.0

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/foo/bar => github.com/foo/bar v1.2.3
)

replace go.etcd.io/etcd/api/v3 => ../api
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
`)
	got := relativeReplaces(gomod)
	want := []string{"k8s.io/api", "k8s.io/client-go", "go.etcd.io/etcd/api/v3"}
	if !slices.Equal(got, want) {
		t.Fatalf("relativeReplaces = %v, want %v", got, want)
	}
	if v := goDirective(gomod); v != "1.26.0" {
		t.Errorf("goDirective = %q", v)
	}
}

// TestWrapperGoMod: relative replaces become the published staging modules (only with a
// StagingVersion), pins are added in path order, the go directive is upstream's.
func TestWrapperGoMod(t *testing.T) {
	upstream := []byte("module example.com/up\n\ngo 1.25.0\n\nreplace example.com/up/api => ./api\n")
	m := Module{Path: "example.com/up", Version: "v1.2.3", StagingVersion: "v0.2.3",
		Pins: map[string]string{"example.com/z": "v0.9.0", "example.com/a": "v0.1.0"}}
	want := "module portico.invalid/k8sbin/example-com_up-v1-2-3\n\ngo 1.25.0\n\nrequire example.com/up v1.2.3\n\n" +
		"replace example.com/up/api => example.com/up/api v0.2.3\n" +
		"replace example.com/a => example.com/a v0.1.0\nreplace example.com/z => example.com/z v0.9.0\n"
	if got := m.wrapperGoMod("example.com_up@v1.2.3", upstream); got != want {
		t.Errorf("wrapper go.mod:\n%s\nwant:\n%s", got, want)
	}
	m.StagingVersion = ""
	if got := m.wrapperGoMod("x", upstream); strings.Contains(got, "example.com/up/api") {
		t.Errorf("a relative replace kept without StagingVersion:\n%s", got)
	}
}

func TestBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{
		"k8s.io/kubernetes/cmd/kube-apiserver": "kube-apiserver",
		"go.etcd.io/etcd/server/v3":            "server",
		"example.com/tool/v":                   "v",
	} {
		if got := binaryName(pkg); got != want {
			t.Errorf("binaryName(%s) = %s, want %s", pkg, got, want)
		}
	}
}
