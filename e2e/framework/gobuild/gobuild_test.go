package gobuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule writes a one-package main module into a new directory and returns it.
func writeModule(t *testing.T, greeting string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/hello\n\ngo 1.22\n",
		"cmd/hello/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + greeting + "\") }\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildOncePerSourceVersion(t *testing.T) {
	cache := t.TempDir()
	dir := writeModule(t, "hello one")
	t.Chdir(dir)
	ctx := context.Background()

	first, err := buildInto(ctx, cache, "example.com/hello/cmd/hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(first).Output(); err != nil || strings.TrimSpace(string(out)) != "hello one" {
		t.Fatalf("built binary says %q, %v", out, err)
	}
	info, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	// Unchanged source: the cached binary, not a new build.
	again, err := buildInto(ctx, cache, "example.com/hello/cmd/hello", "")
	if err != nil {
		t.Fatal(err)
	}
	info2, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || !info2.ModTime().Equal(info.ModTime()) {
		t.Errorf("unchanged source rebuilt: %s (%v) then %s (%v)", first, info.ModTime(), again, info2.ModTime())
	}
	// Changed source: a new key, a new binary that says the new thing.
	if err := os.WriteFile(filepath.Join(dir, "cmd/hello/main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello two\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := buildInto(ctx, cache, "example.com/hello/cmd/hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Fatalf("changed source kept the path %s", first)
	}
	if out, err := exec.Command(changed).Output(); err != nil || strings.TrimSpace(string(out)) != "hello two" {
		t.Fatalf("rebuilt binary says %q, %v", out, err)
	}
	if matches, _ := filepath.Glob(filepath.Join(cache, "gobuild", "hello-*", "hello.tmp*")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestBuildTagsApart(t *testing.T) {
	cache := t.TempDir()
	dir := writeModule(t, "plain")
	if err := os.WriteFile(filepath.Join(dir, "cmd/hello/main.go"), []byte("//go:build !lean\n\npackage main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"plain\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd/hello/lean.go"), []byte("//go:build lean\n\npackage main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"lean\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	ctx := context.Background()
	plain, err := buildInto(ctx, cache, "example.com/hello/cmd/hello", "")
	if err != nil {
		t.Fatal(err)
	}
	lean, err := buildInto(ctx, cache, "example.com/hello/cmd/hello", "lean")
	if err != nil {
		t.Fatal(err)
	}
	if plain == lean {
		t.Fatalf("both builds at %s", plain)
	}
	for bin, want := range map[string]string{plain: "plain", lean: "lean"} {
		if out, err := exec.Command(bin).Output(); err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s says %q (%v), want %q", bin, out, err, want)
		}
	}
}

func TestBuildErrorNamesPackage(t *testing.T) {
	dir := writeModule(t, "x")
	if err := os.WriteFile(filepath.Join(dir, "cmd/hello/main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, err := buildInto(context.Background(), t.TempDir(), "example.com/hello/cmd/hello", "")
	if err == nil || !strings.Contains(err.Error(), "example.com/hello/cmd/hello") || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("error %v, want the package and the compiler's message", err)
	}
}

func TestImportPath(t *testing.T) {
	for in, want := range map[string]string{
		"cmd/portico-agent":              Module + "/cmd/portico-agent",
		Module + "/e2e/tools/echoserver": Module + "/e2e/tools/echoserver",
		"example.com/hello/cmd/hello":    "example.com/hello/cmd/hello",
	} {
		if got := importPath(in); got != want {
			t.Errorf("importPath(%q) = %q, want %q", in, got, want)
		}
	}
}
