// Package gobuild builds the Go programs the end-to-end suites, the demo and the labs run
// (cmd/portico-*, e2e/tools/*) once per source version into Portico's cache
// (internal/prereq.CacheDir()/gobuild/<name>-<key>/<name>) and reuses them: the key hashes the
// Go version, GOOS/GOARCH, the build settings that change the output (CGO_ENABLED, GOFLAGS,
// GOAMD64...), every main-module package the program links (file names and contents) and the
// versions of every other module it links. A test binary builds each program at most once;
// concurrent test binaries may both build, and each installs by rename, so none runs a
// half-written file. Builds of older sources go when unused for a while (e2e/framework/cacheprune).
package gobuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/portico-lb/portico/e2e/framework/cacheprune"
	"github.com/portico-lb/portico/internal/prereq"
)

// Module is the main module's path; Binary accepts package paths relative to it ("cmd/x").
const Module = "github.com/portico-lb/portico"

var builds sync.Map // package path -> *build

type build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of main package pkg (an import path, or one relative to Module such
// as "cmd/portico-agent" or "e2e/tools/echoserver"), built into the cache if this source
// version is not there yet. It runs the go command in the current directory, which must be
// inside the module (tests run in their package's directory; the demo in the repository).
func Binary(ctx context.Context, pkg string) (string, error) {
	return BinaryTags(ctx, pkg, "")
}

// BinaryTags is Binary built with the build tags tags (comma-separated, as go build -tags
// takes them; "" is Binary), cached apart from the builds with other tags.
func BinaryTags(ctx context.Context, pkg, tags string) (string, error) {
	pkg = importPath(pkg)
	v, _ := builds.LoadOrStore(pkg+" "+tags, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = buildInto(ctx, prereq.CacheDir(), pkg, tags) })
	if b.err != nil {
		// Let a later caller (e.g. after a cancelled context) try again.
		builds.CompareAndDelete(pkg+" "+tags, b)
	}
	return b.path, b.err
}

// BinaryForTest is Binary that fails tb on error.
func BinaryForTest(tb testing.TB, pkg string) string {
	tb.Helper()
	bin, err := Binary(context.Background(), pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

func importPath(pkg string) string {
	if strings.HasPrefix(pkg, Module+"/") || pkg == Module || strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
		return pkg
	}
	return path.Join(Module, pkg)
}

func buildInto(ctx context.Context, cache, pkg, tags string) (string, error) {
	key, err := keyTags(ctx, pkg, tags)
	if err != nil {
		return "", err
	}
	name := path.Base(pkg)
	dir := filepath.Join(cache, "gobuild", name+"-"+key)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		cacheprune.Touch(dir)
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", tmp, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, bin); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("installing %s: %w", name, err)
	}
	cacheprune.Prune(filepath.Dir(dir), name+"-")
	return bin, nil
}

// listFormat prints, per linked package: whether it is in the main module, its directory and
// files (main module), or its module version (others; the standard library has neither).
const listFormat = `{{if .Module}}{{if .Module.Main}}M {{.ImportPath}} {{.Dir}} {{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .EmbedFiles " "}}{{else}}D {{.Module.Path}} {{.Module.Version}}{{if .Module.Replace}} => {{.Module.Replace.Path}} {{.Module.Replace.Version}}{{end}}{{end}}{{end}}`

// Key is the source version of main package pkg: a hash of what its binary depends on.
func Key(ctx context.Context, pkg string) (string, error) {
	return keyTags(ctx, pkg, "")
}

// keyTags is Key of pkg built with the build tags tags.
func keyTags(ctx context.Context, pkg, tags string) (string, error) {
	pkg = importPath(pkg)
	out, err := exec.CommandContext(ctx, "go", "list", "-tags", tags, "-deps", "-f", listFormat, pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("listing the sources of %s: %w %s", pkg, err, bytes.TrimSpace(stderr))
	}
	env, err := exec.CommandContext(ctx, "go", "env", "CGO_ENABLED", "GOFLAGS", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOTOOLCHAIN").Output()
	if err != nil {
		return "", fmt.Errorf("reading go env: %w", err)
	}
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if tags != "" {
		fmt.Fprintln(h, "tags", tags) // an untagged build's key stays as it was
	}
	h.Write(env)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(h, line)
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "M" {
			continue
		}
		for _, name := range f[3:] {
			b, err := os.ReadFile(filepath.Join(f[2], name))
			if err != nil {
				return "", fmt.Errorf("hashing the sources of %s: %w", pkg, err)
			}
			fmt.Fprintln(h, name, len(b))
			h.Write(b)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("listing the sources of %s: %w", pkg, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
