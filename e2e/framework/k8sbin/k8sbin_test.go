package k8sbin

import (
	"slices"
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
