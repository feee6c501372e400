package images

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/portico-lb/portico/internal/ociimage"
)

// debRoot is a tree of Debian packages downloaded (apt-get download) at the version the mirror
// serves now for the image's architecture (apt's candidate, from its package lists: never the
// version installed on this machine, which the mirror drops as soon as it moves on) and
// unpacked (dpkg-deb -x) side by side in dir, for taking files out of them into an image.
// Nothing of it depends on what is installed here: the package that holds a library a program
// needs is found along the Depends of the packages already taken.
type debRoot struct {
	cache string              // downloaded .deb files, reused across runs
	dir   string              // where the packages are unpacked, one directory each
	arch  string              // the image's Debian architecture (amd64, arm64)
	multi string              // its multiarch directory (x86_64-linux-gnu)
	pkgs  map[string]string   // package -> version
	deps  map[string][]string // package -> what it depends on (Pre-Depends, Depends)
	log   func(string, ...any)
}

// newDebRoot returns a debRoot for the Go architecture goarch (empty: this build's).
func newDebRoot(cache, dir, goarch string, log func(string, ...any)) (*debRoot, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	arch, multi := debArchs[goarch], multiarchs[goarch]
	if arch == "" || multi == "" {
		return nil, fmt.Errorf("no Debian architecture for GOARCH %q", goarch)
	}
	return &debRoot{cache: cache, dir: dir, arch: arch, multi: multi, pkgs: map[string]string{}, deps: map[string][]string{}, log: log}, nil
}

// libDirs are where the loader looks for libraries in a Debian system, each with the
// multiarch directory below it (lib/x86_64-linux-gnu).
var libDirs = []string{"lib", "usr/lib"}

// debArchs are Debian's names of Go's architectures (GOARCH).
var debArchs = map[string]string{"amd64": "amd64", "arm64": "arm64", "arm": "armhf", "386": "i386",
	"ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64"}

// multiarchs are Debian's multiarch directories of Go's architectures.
var multiarchs = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "arm": "arm-linux-gnueabihf",
	"386": "i386-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "riscv64": "riscv64-linux-gnu"}

// debArch and multiarch are those of this build's architecture.
var (
	debArch   = debArchs[runtime.GOARCH]
	multiarch = multiarchs[runtime.GOARCH]
)

// DebianArch returns Debian's name of the Go architecture goarch (arm64, armhf), or "".
func DebianArch(goarch string) string { return debArchs[goarch] }

// isRoot reports whether this process may run apt-get update.
var isRoot = func() bool { return os.Geteuid() == 0 }

// aptUpdate runs `apt-get update` at most once per process: when a download fails because
// apt's lists name a version the mirror no longer serves (lists older than the mirror).
var aptUpdate struct {
	sync.Mutex
	done bool
	err  error
}

// record is what apt's lists say of a package's candidate version.
type record struct {
	version, arch string
	deps          []string
}

// candidates returns apt's candidates of pkgs for the image's architecture (the versions the
// mirror serves, as of apt's lists). A name apt has no package of (a virtual package) is
// missing from the result. apt names a package of every architecture (Architecture: all, as
// ca-certificates) pkg:all only, not pkg:arm64 on an amd64 machine: those apt has no
// pkg:<arch> of are asked again as pkg:all.
func (r *debRoot) candidates(ctx context.Context, pkgs []string) (map[string]record, error) {
	recs, err := r.show(ctx, pkgs, r.arch)
	if err != nil {
		return nil, err
	}
	var rest []string
	for _, p := range pkgs {
		if _, ok := recs[p]; !ok {
			rest = append(rest, p)
		}
	}
	if len(rest) == 0 || r.arch == debArch {
		return recs, nil
	}
	all, err := r.show(ctx, rest, "all")
	if err != nil {
		return nil, err
	}
	maps.Copy(recs, all)
	return recs, nil
}

// show returns what apt's lists say of pkgs for the architecture arch, in one apt-cache call.
func (r *debRoot) show(ctx context.Context, pkgs []string, arch string) (map[string]record, error) {
	args := []string{"show", "--no-all-versions"}
	for _, p := range pkgs {
		args = append(args, p+":"+arch)
	}
	out, err := output(ctx, "", "apt-cache", args...)
	if err != nil && !strings.Contains(err.Error(), "No packages found") {
		return nil, err
	}
	recs := map[string]record{}
	for _, stanza := range strings.Split(out, "\n\n") {
		var name string
		var rec record
		for _, line := range strings.Split(stanza, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "Package":
				name = v
			case "Version":
				rec.version = v
			case "Architecture":
				rec.arch = v
			case "Pre-Depends", "Depends":
				rec.deps = append(rec.deps, parseDepends(v)...)
			}
		}
		if _, seen := recs[name]; name != "" && rec.version != "" && rec.arch != "" && !seen {
			recs[name] = rec
		}
	}
	return recs, nil
}

// parseDepends returns the package names of a Depends field ("libc6 (>= 2.34), debconf |
// debconf-2.0, awk:any"): the first of each set of alternatives, without version or
// architecture qualifiers.
func parseDepends(field string) []string {
	var out []string
	for _, dep := range strings.Split(field, ",") {
		first, _, _ := strings.Cut(dep, "|")
		first, _, _ = strings.Cut(first, "(")
		first, _, _ = strings.Cut(first, ":")
		if first = strings.TrimSpace(first); first != "" {
			out = append(out, first)
		}
	}
	return out
}

// debFile is the name apt-get download gives a package's file: the epoch's colon is escaped
// as %3a.
func debFile(pkg string, rec record) string {
	return fmt.Sprintf("%s_%s_%s.deb", pkg, strings.ReplaceAll(rec.version, ":", "%3a"), rec.arch)
}

// add downloads and unpacks pkg at the version the mirror serves for the image's
// architecture.
func (r *debRoot) add(ctx context.Context, pkg string) error {
	_, err := r.addAll(ctx, []string{pkg}, true)
	return err
}

// addAll downloads (one apt-get call for those not in the cache) and unpacks pkgs at the
// versions the mirror serves for the image's architecture, and returns those added. With
// strict, a package apt has no candidate of is an error; without, it is passed over (a virtual
// package among the dependencies). A download that fails because apt's lists are older than
// the mirror is tried again after `apt-get update` when running as root.
func (r *debRoot) addAll(ctx context.Context, pkgs []string, strict bool) ([]string, error) {
	var want []string
	for _, p := range pkgs {
		p = strings.TrimSuffix(strings.Split(p, ":")[0], ",")
		if _, ok := r.pkgs[p]; !ok && !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	recs, err := r.resolve(ctx, want, strict)
	if err != nil {
		return nil, err
	}
	if err := r.download(ctx, recs); err != nil {
		if !r.updateLists(ctx) {
			return nil, err
		}
		if recs, err = r.resolve(ctx, want, strict); err != nil {
			return nil, err
		}
		if err := r.download(ctx, recs); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	var added []string
	for _, p := range want {
		rec, ok := recs[p]
		if !ok {
			continue
		}
		deb := filepath.Join(r.cache, debFile(p, rec))
		if _, err := output(ctx, "", "dpkg-deb", "-x", deb, filepath.Join(r.dir, p)); err != nil {
			return nil, fmt.Errorf("unpacking %s: %w", filepath.Base(deb), err)
		}
		r.pkgs[p] = rec.version
		r.deps[p] = rec.deps
		added = append(added, p)
	}
	return added, nil
}

// resolve returns the candidates of want; with strict, every one must have one.
func (r *debRoot) resolve(ctx context.Context, want []string, strict bool) (map[string]record, error) {
	recs, err := r.candidates(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("asking apt for %s: %w", strings.Join(want, ", "), err)
	}
	for _, p := range want {
		if _, ok := recs[p]; ok {
			continue
		}
		if strict {
			return nil, fmt.Errorf("apt's package lists here have no %s for %s (as root, `apt-get update`, which `make prereqs` runs; "+
				"for an architecture other than this machine's, `dpkg --add-architecture %s` first)", p, r.arch, r.arch)
		}
		r.log("passing over dependency %s: apt has no package %s for %s (a virtual package)", p, p, r.arch)
	}
	return recs, nil
}

// download fetches the packages of recs not in the cache yet, in one apt-get call, through a
// directory of its own whose files are renamed into place, so that two builds at once never
// read a half-written file.
func (r *debRoot) download(ctx context.Context, recs map[string]record) error {
	var want, files []string
	for _, p := range slices.Sorted(maps.Keys(recs)) {
		file := debFile(p, recs[p])
		if _, err := os.Stat(filepath.Join(r.cache, file)); err == nil {
			continue
		}
		want = append(want, p+":"+recs[p].arch+"="+recs[p].version)
		files = append(files, file)
	}
	if len(want) == 0 {
		return nil
	}
	r.log("downloading %s", strings.Join(want, " "))
	if err := os.MkdirAll(r.cache, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(r.cache, ".download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // apt-get's _apt user writes there
		return err
	}
	if _, err := output(ctx, tmp, "apt-get", append([]string{"download", "-q"}, want...)...); err != nil {
		return fmt.Errorf("downloading %s, the versions apt's lists name (the mirror may have moved on: as root, `apt-get update`, which `make prereqs` runs): %w",
			strings.Join(want, " "), err)
	}
	for _, file := range files {
		if err := os.Rename(filepath.Join(tmp, file), filepath.Join(r.cache, file)); err != nil {
			return fmt.Errorf("apt-get download wrote no %s: %w", file, err)
		}
	}
	return nil
}

// updateLists runs `apt-get update` once per process, as root only, and reports whether it
// ran now and succeeded (so that a failed download is worth trying again).
func (r *debRoot) updateLists(ctx context.Context) bool {
	if !isRoot() {
		return false
	}
	aptUpdate.Lock()
	defer aptUpdate.Unlock()
	if aptUpdate.done {
		return false
	}
	aptUpdate.done = true
	r.log("apt's lists name a version the mirror does not serve: apt-get update")
	_, aptUpdate.err = output(ctx, "", "apt-get", "update", "-qq")
	if aptUpdate.err != nil {
		r.log("apt-get update: %v", aptUpdate.err)
	}
	return aptUpdate.err == nil
}

// addProvider adds packages along the dependencies of those added so far, breadth first, a
// level at a time, until has reports that one holds what is looked for (what, for the
// error). A dependency apt has no package of (a virtual package) is passed over.
func (r *debRoot) addProvider(ctx context.Context, what string, has func() bool) error {
	tried := map[string]bool{}
	for depth := 0; depth < maxDependencyDepth; depth++ {
		var next []string
		for _, p := range slices.Sorted(maps.Keys(r.pkgs)) {
			for _, d := range r.deps[p] {
				if _, ok := r.pkgs[d]; !ok && !tried[d] {
					tried[d] = true
					next = append(next, d)
				}
			}
		}
		if len(next) == 0 {
			break
		}
		if _, err := r.addAll(ctx, next, false); err != nil {
			return fmt.Errorf("looking for %s among the dependencies: %w", what, err)
		}
		if has() {
			return nil
		}
	}
	return fmt.Errorf("none of the packages %v nor their dependencies (%d levels) holds %s",
		slices.Sorted(maps.Keys(r.pkgs)), maxDependencyDepth, what)
}

// maxDependencyDepth bounds addProvider's walk: a library a program needs comes from a
// package its own package depends on, or one level further (libcurl4's libraries for curl).
const maxDependencyDepth = 4

// find returns the package and the host path of p (absolute, in the image) among the
// unpacked packages.
func (r *debRoot) find(p string) (pkg, host string, ok bool) {
	for _, pkg := range slices.Sorted(maps.Keys(r.pkgs)) {
		h := filepath.Join(r.dir, pkg, p)
		if _, err := os.Lstat(h); err == nil {
			return pkg, h, true
		}
	}
	return "", "", false
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
		return fmt.Errorf("%s is in none of the packages %v", p, slices.Sorted(maps.Keys(f.root.pkgs)))
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
// host; other files need nothing. A library none of the unpacked packages holds comes from
// their dependencies (debRoot.addProvider).
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

// takeLib adds the absolute path p, adding the package that holds it when needed.
func (f *files) takeLib(ctx context.Context, p string) error {
	if _, _, ok := f.root.find(p); !ok {
		if err := f.root.addProvider(ctx, p, func() bool { _, _, ok := f.root.find(p); return ok }); err != nil {
			return err
		}
	}
	return f.take(ctx, p)
}

// libPath returns the image path of library lib in the library directories of the unpacked
// packages, adding the package that holds it when none does.
func (f *files) libPath(ctx context.Context, lib string) (string, error) {
	lookup := func() (string, bool) {
		for _, pkg := range slices.Sorted(maps.Keys(f.root.pkgs)) {
			for _, d := range libDirs {
				p := path.Join("/", d, f.root.multi, lib)
				if _, err := os.Lstat(filepath.Join(f.root.dir, pkg, p)); err == nil {
					return p, true
				}
			}
		}
		return "", false
	}
	if p, ok := lookup(); ok {
		return p, nil
	}
	if err := f.root.addProvider(ctx, lib, func() bool { _, ok := lookup(); return ok }); err != nil {
		return "", err
	}
	p, _ := lookup()
	return p, nil
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
