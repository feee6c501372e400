package images

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/portico-lb/portico/internal/ociimage"
)

// debRoot is a tree of Debian packages downloaded (apt-get download, pinned to the version
// this machine has installed) and unpacked (dpkg-deb -x) side by side in dir, for taking files
// out of them into an image.
type debRoot struct {
	cache string            // downloaded .deb files, reused across runs
	dir   string            // where the packages are unpacked, one directory each
	pkgs  map[string]string // package -> version
	log   func(string, ...any)
}

// libDirs are where the loader looks for libraries in a Debian system, each with the
// multiarch directory below it (lib/x86_64-linux-gnu).
var libDirs = []string{"lib", "usr/lib"}

// multiarch is Debian's multiarch directory of this architecture.
var multiarch = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]

// add downloads and unpacks pkg at the version dpkg has installed (any version apt has when
// it is not installed).
func (r *debRoot) add(ctx context.Context, pkg string) error {
	pkg = strings.TrimSuffix(strings.Split(pkg, ":")[0], ",")
	if _, ok := r.pkgs[pkg]; ok {
		return nil
	}
	version, err := output(ctx, "", "dpkg-query", "-W", "-f=${Version}", pkg)
	if err != nil {
		return fmt.Errorf("package %s is not installed here, so its version cannot be pinned (make prereqs installs it): %w", pkg, err)
	}
	arch, err := output(ctx, "", "dpkg-query", "-W", "-f=${Architecture}", pkg)
	if err != nil {
		return err
	}
	// The file name apt-get download gives: the epoch's colon is escaped as %3a.
	file := fmt.Sprintf("%s_%s_%s.deb", pkg, strings.ReplaceAll(version, ":", "%3a"), arch)
	deb := filepath.Join(r.cache, file)
	if _, err := os.Stat(deb); err != nil {
		r.log("downloading %s=%s", pkg, version)
		if err := os.MkdirAll(r.cache, 0o755); err != nil {
			return err
		}
		if _, err := output(ctx, r.cache, "apt-get", "download", "-q", pkg+"="+version); err != nil {
			return fmt.Errorf("downloading %s=%s (apt-get update first if apt has no lists): %w", pkg, version, err)
		}
		if _, err := os.Stat(deb); err != nil {
			return fmt.Errorf("apt-get download %s=%s wrote no %s", pkg, version, file)
		}
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	if _, err := output(ctx, "", "dpkg-deb", "-x", deb, filepath.Join(r.dir, pkg)); err != nil {
		return fmt.Errorf("unpacking %s: %w", file, err)
	}
	r.pkgs[pkg] = version
	return nil
}

// find returns the package and the host path of p (absolute, in the image) among the
// unpacked packages.
func (r *debRoot) find(p string) (pkg, host string, ok bool) {
	for _, pkg := range slices.Sorted(mapsKeys(r.pkgs)) {
		h := filepath.Join(r.dir, pkg, p)
		if _, err := os.Lstat(h); err == nil {
			return pkg, h, true
		}
	}
	return "", "", false
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// files collects image paths and where they come from, following symbolic links and the
// libraries ELF files need.
type files struct {
	root    *debRoot
	regular map[string]string // image path -> host path
	links   map[string]string // image path -> link target
}

// take adds image path p from the packages: a symbolic link with what it points to, a
// regular file with the libraries and loader it needs when it is an ELF file.
func (f *files) take(ctx context.Context, p string) error {
	if _, ok := f.regular[p]; ok {
		return nil
	}
	if _, ok := f.links[p]; ok {
		return nil
	}
	_, host, ok := f.root.find(p)
	if !ok {
		return fmt.Errorf("%s is in none of the packages %v", p, slices.Sorted(mapsKeys(f.root.pkgs)))
	}
	fi, err := os.Lstat(host)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(host)
		if err != nil {
			return err
		}
		f.links[p] = target
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		return f.take(ctx, target)
	}
	f.regular[p] = host
	return f.takeELFNeeds(ctx, p, host)
}

// takeELFNeeds adds the loader and the libraries (DT_NEEDED, transitively) of the ELF file at
// host; other files need nothing. A library none of the unpacked packages holds is looked up
// with dpkg -S among the installed packages, whose package is then downloaded too.
func (f *files) takeELFNeeds(ctx context.Context, p, host string) error {
	e, err := elf.Open(host)
	if err != nil {
		return nil // not an ELF file
	}
	defer e.Close()
	needed, err := e.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("reading %s's libraries: %w", p, err)
	}
	for _, prog := range e.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		data := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(data, 0); err != nil {
			return fmt.Errorf("reading %s's loader: %w", p, err)
		}
		interp := string(bytes.TrimRight(data, "\x00"))
		if err := f.takeLib(ctx, interp); err != nil {
			return fmt.Errorf("%s's loader: %w", p, err)
		}
	}
	for _, lib := range needed {
		found, err := f.libPath(ctx, lib)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", p, lib, err)
		}
		if err := f.take(ctx, found); err != nil {
			return err
		}
	}
	return nil
}

// takeLib adds the absolute path p, downloading the package that holds it when needed.
func (f *files) takeLib(ctx context.Context, p string) error {
	if _, _, ok := f.root.find(p); !ok {
		if err := f.addOwner(ctx, p, func(string) bool { return true }); err != nil {
			return err
		}
	}
	return f.take(ctx, p)
}

// libPath returns the image path of library lib in the library directories of the unpacked
// packages, adding the installed package that holds it when none does.
func (f *files) libPath(ctx context.Context, lib string) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		for _, pkg := range slices.Sorted(mapsKeys(f.root.pkgs)) {
			for _, d := range libDirs {
				p := path.Join("/", d, multiarch, lib)
				if _, err := os.Lstat(filepath.Join(f.root.dir, pkg, p)); err == nil {
					return p, nil
				}
			}
		}
		if attempt == 0 {
			if err := f.addOwner(ctx, "*/"+lib, func(p string) bool { return path.Base(path.Dir(p)) == multiarch }); err != nil {
				return "", err
			}
		}
	}
	return "", fmt.Errorf("not found in the packages %v", slices.Sorted(mapsKeys(f.root.pkgs)))
}

// addOwner adds the installed package that holds a file matching pattern (dpkg -S) at a path
// accept takes.
func (f *files) addOwner(ctx context.Context, pattern string, accept func(string) bool) error {
	out, err := output(ctx, "", "dpkg", "-S", pattern)
	if err != nil {
		return fmt.Errorf("no installed package holds %s: %w", pattern, err)
	}
	// "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6", one line per match; diversions start
	// with "diversion by".
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "diversion ") {
			continue
		}
		owner, p, ok := strings.Cut(line, ": ")
		if !ok || !accept(p) {
			continue
		}
		return f.root.add(ctx, strings.Split(owner, ", ")[0])
	}
	return fmt.Errorf("no installed package holds %s", pattern)
}

// output runs a command in dir and returns its trimmed standard output.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// layer is a layer of the files taken: the regular files and the symbolic links.
func (f *files) layer() (*ociimage.Layer, error) {
	var l ociimage.Layer
	for p, host := range f.regular {
		if err := l.AddHostFile(p, host); err != nil {
			return nil, err
		}
	}
	for p, target := range f.links {
		if err := l.AddSymlink(p, target); err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// packages names the packages of debs the taken files come from, with their versions.
func (f *files) packages(debs *debRoot) map[string]string {
	used := map[string]string{}
	for _, host := range f.regular {
		rel, _ := filepath.Rel(debs.dir, host)
		pkg := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		used[pkg] = debs.pkgs[pkg]
	}
	return used
}
