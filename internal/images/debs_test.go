package images

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fake Debian tools: the test binary runs as apt-cache, apt-get and dpkg-deb through links
// of those names on a PATH that holds nothing else (no package database to ask what is
// installed), so no test here reaches a real apt, a mirror or the network. The mirror is
// described by environment variables:
//
//	FAKE_APT_SERVED     pkg=version,...  what the mirror serves
//	FAKE_APT_LISTS      pkg=version,...  what apt's lists name until `apt-get update` runs
//	                                     (empty: the lists match the mirror)
//	FAKE_APT_DIR        a directory for the fake's state and its log of calls (calls.log)
var fakeTools = []string{"apt-cache", "apt-get", "dpkg-deb"}

func TestMain(m *testing.M) {
	if name := filepath.Base(os.Args[0]); slices.Contains(fakeTools, name) {
		os.Exit(fakeApt(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func versions(env string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(os.Getenv(env), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// fakeApt is the fake tool name run with args; it returns the exit status.
func fakeApt(name string, args []string) int {
	dir := os.Getenv("FAKE_APT_DIR")
	f, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(f, name+" "+strings.Join(args, " "))
	f.Close()
	served := versions("FAKE_APT_SERVED")
	lists := served
	if _, err := os.Stat(filepath.Join(dir, "updated")); err != nil && os.Getenv("FAKE_APT_LISTS") != "" {
		lists = versions("FAKE_APT_LISTS")
	}
	switch {
	case name == "apt-cache" && len(args) > 2 && args[0] == "show":
		for _, a := range args[2:] {
			pkg, arch, _ := strings.Cut(a, ":")
			if v, ok := lists[pkg]; ok && arch == debArch {
				fmt.Printf("Package: %s\nVersion: %s\nArchitecture: %s\nDepends: libc6 (>= 2.36)\nDescription: fake\n\n", pkg, v, debArch)
			}
		}
		return 0
	case name == "apt-get" && len(args) > 0 && args[0] == "update":
		return writeFile(filepath.Join(dir, "updated"), "")
	case name == "apt-get" && len(args) > 0 && args[0] == "download":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			nameArch, v, _ := strings.Cut(a, "=")
			pkg, arch, _ := strings.Cut(nameArch, ":")
			if arch == "" {
				arch = debArch
			}
			if served[pkg] != v {
				fmt.Fprintf(os.Stderr, "E: Can't find a source to download version '%s' of '%s:%s'\n", v, pkg, arch)
				return 100
			}
			if code := writeFile(fmt.Sprintf("%s_%s_%s.deb", pkg, strings.ReplaceAll(v, ":", "%3a"), arch), "fake deb of "+pkg+"="+v); code != 0 {
				return code
			}
		}
		return 0
	case name == "dpkg-deb" && len(args) == 3 && args[0] == "-x": // -x deb dir: the deb's "files"
		base := filepath.Base(args[1])
		pkg := base[:strings.Index(base, "_")]
		content, err := os.ReadFile(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := os.MkdirAll(filepath.Join(args[2], "bin"), 0o755); err != nil {
			return 2
		}
		return writeFile(filepath.Join(args[2], "bin", pkg), string(content))
	}
	fmt.Fprintf(os.Stderr, "fake %s: unexpected arguments %q\n", name, args)
	return 2
}

func writeFile(p, content string) int {
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fakeMachine puts the fake tools alone on PATH and returns the fake's directory.
func fakeMachine(t *testing.T, served, lists string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, dir := t.TempDir(), t.TempDir()
	for _, n := range fakeTools {
		if err := os.Symlink(self, filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	t.Setenv("FAKE_APT_DIR", dir)
	t.Setenv("FAKE_APT_SERVED", served)
	t.Setenv("FAKE_APT_LISTS", lists)
	return dir
}

func calls(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPackagesAtTheServedVersion: the image builder takes a package at the version the mirror
// serves, never at the one installed here, which the mirror no longer has (as bash
// 5.2.15-2+b8 installed against 5.2.15-2+b13 served made a fresh `make test` fail), and the
// image's package label says what went in.
func TestPackagesAtTheServedVersion(t *testing.T) {
	dir := fakeMachine(t, "bash=5.2.15-2+b13", "")
	o := DebLayerOptions{DebCache: filepath.Join(t.TempDir(), "cache"), Work: t.TempDir(), Log: t.Logf}
	l, pkgs, err := DebLayer(context.Background(), o, []string{"bash"}, []string{"/bin/bash"}, nil)
	if err != nil {
		t.Fatalf("DebLayer: %v\nthe fake tools were called so:\n%s", err, calls(t, dir))
	}
	if l == nil || !maps.Equal(pkgs, map[string]string{"bash": "5.2.15-2+b13"}) {
		t.Errorf("packages %v, want bash=5.2.15-2+b13 (the served version)", pkgs)
	}
	if got, want := packagesLabel(pkgs), "bash=5.2.15-2+b13"; got != want {
		t.Errorf("the image's package label %q, want %q", got, want)
	}
	log := calls(t, dir)
	if want := "apt-get download -q bash:" + debArch + "=5.2.15-2+b13"; !strings.Contains(log, want) {
		t.Errorf("no %q among the calls:\n%s", want, log)
	}
	if strings.Contains(log, "5.2.15-2+b8") {
		t.Errorf("the builder asked for 5.2.15-2+b8 (what is installed here):\n%s", log)
	}
	// A second build takes the package from the cache: no download.
	before := strings.Count(log, "apt-get download")
	if _, _, err := DebLayer(context.Background(), DebLayerOptions{DebCache: o.DebCache, Work: t.TempDir()}, []string{"bash"}, []string{"/bin/bash"}, nil); err != nil {
		t.Fatal(err)
	}
	if after := strings.Count(calls(t, dir), "apt-get download"); after != before {
		t.Errorf("a second build downloaded again (%d downloads, was %d)", after, before)
	}
}

// TestStaleListsUpdated: when apt's lists name a version the mirror dropped, the builder (as
// root) runs apt-get update once and takes the version the fresh lists name; not as root, it
// fails with a message that names the fix.
func TestStaleListsUpdated(t *testing.T) {
	for _, root := range []bool{true, false} {
		t.Run(fmt.Sprintf("root=%v", root), func(t *testing.T) {
			dir := fakeMachine(t, "bash=5.2.15-2+b13", "bash=5.2.15-2+b8")
			old := isRoot
			isRoot = func() bool { return root }
			defer func() { isRoot = old }()
			aptUpdate.Lock()
			aptUpdate.done = false
			aptUpdate.Unlock()
			o := DebLayerOptions{DebCache: filepath.Join(t.TempDir(), "cache"), Work: t.TempDir(), Log: t.Logf}
			_, pkgs, err := DebLayer(context.Background(), o, []string{"bash"}, []string{"/bin/bash"}, nil)
			log := calls(t, dir)
			if !root {
				if err == nil || !strings.Contains(err.Error(), "apt-get update") {
					t.Errorf("not root, stale lists: error %v, want one naming apt-get update", err)
				}
				if strings.Contains(log, "apt-get update") {
					t.Errorf("ran apt-get update without root:\n%s", log)
				}
				return
			}
			if err != nil {
				t.Fatalf("DebLayer: %v\n%s", err, log)
			}
			if !maps.Equal(pkgs, map[string]string{"bash": "5.2.15-2+b13"}) {
				t.Errorf("packages %v, want bash=5.2.15-2+b13", pkgs)
			}
			if n := strings.Count(log, "apt-get update"); n != 1 {
				t.Errorf("apt-get update ran %d times, want 1:\n%s", n, log)
			}
		})
	}
}

// TestNoCandidate: a package apt has no version of for the image's architecture is an error
// naming it and the fix.
func TestNoCandidate(t *testing.T) {
	fakeMachine(t, "bash=5.2.15-2+b13", "")
	o := DebLayerOptions{DebCache: t.TempDir(), Work: t.TempDir()}
	_, _, err := DebLayer(context.Background(), o, []string{"no-such-package"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no-such-package") || !strings.Contains(err.Error(), debArch) {
		t.Errorf("error %v, want one naming no-such-package and %s", err, debArch)
	}
}

func TestParseDepends(t *testing.T) {
	for field, want := range map[string][]string{
		"libc6 (>= 2.34), libtinfo6 (>= 6)":         {"libc6", "libtinfo6"},
		"debconf (>= 0.5) | debconf-2.0, awk:any":   {"debconf", "awk"},
		"libssl3 (>= 3.0.0), zlib1g (>= 1:1.1.4), ": {"libssl3", "zlib1g"},
		"": nil,
	} {
		if got := parseDepends(field); !slices.Equal(got, want) {
			t.Errorf("parseDepends(%q) = %q, want %q", field, got, want)
		}
	}
}

// TestForeignArchitecture: the packages of an image for another architecture are asked of apt
// for that architecture (pkg:arm64), and when apt's lists have none, the error names the
// architecture and the fix (dpkg --add-architecture, which make prereqs runs).
func TestForeignArchitecture(t *testing.T) {
	dir := fakeMachine(t, "bash=5.2.15-2+b13", "")
	foreign := map[bool]string{true: "arm64", false: "amd64"}[debArch != "arm64"]
	debs, err := newDebRoot(t.TempDir(), t.TempDir(), foreign, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	err = debs.add(context.Background(), "bash")
	if err == nil || !strings.Contains(err.Error(), "dpkg --add-architecture "+foreign) {
		t.Errorf("error %v, want one naming dpkg --add-architecture %s", err, foreign)
	}
	if log := calls(t, dir); !strings.Contains(log, "apt-cache show --no-all-versions bash:"+foreign) {
		t.Errorf("apt was not asked for bash:%s:\n%s", foreign, log)
	}
	if _, err := newDebRoot(t.TempDir(), t.TempDir(), "mips64", nil); err == nil {
		t.Error("newDebRoot(mips64): no error, want one: Debian's name of it is not known here")
	}
}
