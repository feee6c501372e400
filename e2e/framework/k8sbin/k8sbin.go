package k8sbin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/portico-lb/portico/internal/prereq"
)

// Pinned versions of the binaries the tests run.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.8"
	// CoreDNSVersion is the cluster DNS of e2e/framework/nodes (EnsureCoreDNS).
	CoreDNSVersion = "v1.15.0"
)

// Binaries holds absolute paths of built, ready-to-run binaries.
type Binaries struct {
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeProxy             string
	KubeScheduler         string
	Kubelet               string
}

// Dir returns the directory holding the kube-apiserver binary; it is the directory
// controller-runtime's envtest expects in KUBEBUILDER_ASSETS once etcd is linked in.
func (b Binaries) Dir() string { return filepath.Dir(b.KubeAPIServer) }

// Options tune Ensure.
type Options struct {
	// CacheDir is where wrapper modules and binaries live. Empty means DefaultCacheDir().
	CacheDir string
	// Log receives progress lines. Nil discards them.
	Log func(format string, args ...any)
}

// DefaultCacheDir is Portico's cache, as internal/prereq decides it for everything: $PORTICO_CACHE,
// else $XDG_CACHE_HOME/portico, else ~/.cache/portico.
func DefaultCacheDir() string { return prereq.CacheDir() }

// Module is an upstream Go module whose main packages are built from the Go module proxy
// inside a wrapper module in the cache (<cache>/src/<path with / as _>@<version>), because
// upstream go.mod files carry replace directives that make `go install` refuse them.
type Module struct {
	Path    string // module path, e.g. k8s.io/kubernetes
	Version string
	// StagingVersion maps each relative replace directive of the upstream go.mod to the
	// published module of the same path at this version; empty leaves them out.
	StagingVersion string
	// Pins replace a module with another version of itself (path -> version), for a
	// dependency whose upstream replacement the proxy does not serve.
	Pins map[string]string
	Cmds map[string]string // binary name -> main package path
	// Tests are test binaries built with go test -c: binary name -> package path (e.g.
	// e2e.test -> k8s.io/kubernetes/test/e2e).
	Tests   map[string]string
	Ldflags []string
	// Wrapper names the wrapper module's directory in <cache>/src; empty means
	// <path with / as _>@<version>. A second set of binaries of one module gets its own
	// wrapper, so that the first one's go.mod never changes under a running build.
	Wrapper string
}

// Kubernetes is the pinned k8s.io/kubernetes module with the version stamped as upstream's
// release builds stamp it; callers may change Cmds, Tests and Wrapper to build other binaries
// of it (e2e/framework/conformance: e2e.test, kubectl, agnhost, ginkgo).
func Kubernetes() Module { return kubernetes() }

func kubernetes() Module {
	minor := strings.Split(strings.TrimPrefix(KubernetesVersion, "v"), ".")
	ld := []string{}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ld = append(ld,
			"-X", pkg+".gitVersion="+KubernetesVersion,
			"-X", pkg+".gitMajor="+minor[0],
			"-X", pkg+".gitMinor="+minor[1],
			"-X", pkg+".gitTreeState=clean",
			"-X", pkg+".buildDate=1970-01-01T00:00:00Z",
		)
	}
	return Module{
		Path:           "k8s.io/kubernetes",
		Version:        KubernetesVersion,
		StagingVersion: "v0" + strings.TrimPrefix(KubernetesVersion, "v1"),
		Cmds: map[string]string{
			"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
			"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
			"kube-proxy":              "k8s.io/kubernetes/cmd/kube-proxy",
			"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
			"kubelet":                 "k8s.io/kubernetes/cmd/kubelet",
		},
		Ldflags: ld,
	}
}

func etcd() Module {
	return Module{
		Path:           "go.etcd.io/etcd/server/v3",
		Version:        EtcdVersion,
		StagingVersion: EtcdVersion,
		Cmds:           map[string]string{"etcd": "go.etcd.io/etcd/server/v3"},
		Ldflags:        []string{"-X", "go.etcd.io/etcd/api/v3/version.GitSHA=" + EtcdVersion},
	}
}

// Ensure returns the pinned binaries, building any that are missing from the Go module proxy.
// Concurrent callers (parallel test binaries) serialise on a lock file in the cache.
func Ensure(ctx context.Context, opts Options) (Binaries, error) {
	binDir, err := ensure(ctx, opts, "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion, "build.lock", etcd(), kubernetes())
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{
		Etcd:                  filepath.Join(binDir, "etcd"),
		KubeAPIServer:         filepath.Join(binDir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(binDir, "kube-controller-manager"),
		KubeProxy:             filepath.Join(binDir, "kube-proxy"),
		KubeScheduler:         filepath.Join(binDir, "kube-scheduler"),
		Kubelet:               filepath.Join(binDir, "kubelet"),
	}, nil
}

func coredns() Module {
	return Module{
		Path:           "github.com/coredns/coredns",
		Version:        CoreDNSVersion,
		StagingVersion: CoreDNSVersion,
		Cmds:           map[string]string{"coredns": "github.com/coredns/coredns"},
		Ldflags:        []string{"-X", "github.com/coredns/coredns/coremain.GitCommit=" + CoreDNSVersion},
	}
}

// EnsureCoreDNS returns the path of the pinned CoreDNS (a static binary, CGO_ENABLED=0),
// building it from the Go module proxy if it is missing (about 2.5 minutes cold on 2 cores).
func EnsureCoreDNS(ctx context.Context, opts Options) (string, error) {
	dir, err := EnsureModule(ctx, opts, coredns(), "coredns-"+CoreDNSVersion, "build.lock")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "coredns"), nil
}

// EnsureModule returns the directory <cache>/bin/<binDir> holding every binary of m.Cmds,
// building the missing ones (CGO_ENABLED=0, -trimpath) while holding the lock file
// <cache>/<lockName>, on which concurrent callers serialise.
func EnsureModule(ctx context.Context, opts Options, m Module, binDir, lockName string) (string, error) {
	return ensure(ctx, opts, binDir, lockName, m)
}

// ensure builds the missing binaries of mods into <cache>/bin/<binDir> under the lock file
// <cache>/<lockName>, and returns that directory. When none is missing it takes no lock.
func ensure(ctx context.Context, opts Options, binDir, lockName string, mods ...Module) (string, error) {
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir()
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	dir := filepath.Join(opts.CacheDir, "bin", binDir)
	if !slices.ContainsFunc(mods, func(m Module) bool { return len(m.missing(dir)) > 0 }) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating cache directory: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(opts.CacheDir, lockName))
	if err != nil {
		return "", err
	}
	defer unlock()
	for _, m := range mods {
		if err := m.build(ctx, opts, dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// missing lists the binaries of m that binDir lacks.
func (m Module) missing(binDir string) []string {
	var names []string
	for name := range m.all() {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// all maps every binary of m, main packages and test binaries, to its package.
func (m Module) all() map[string]string {
	all := maps.Clone(m.Cmds)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, m.Tests)
	return all
}

func (c Module) build(ctx context.Context, opts Options, binDir string) error {
	missing := c.missing(binDir)
	if len(missing) == 0 {
		return nil
	}
	wrapper := c.Wrapper
	if wrapper == "" {
		wrapper = strings.ReplaceAll(c.Path, "/", "_") + "@" + c.Version
	}
	src := filepath.Join(opts.CacheDir, "src", wrapper)
	if err := c.writeWrapper(ctx, src); err != nil {
		return fmt.Errorf("preparing wrapper module for %s: %w", c.Path, err)
	}
	// One go build for every missing binary: the packages they share compile once.
	start := time.Now()
	opts.Log("building %s %s", strings.Join(missing, ", "), c.Version)
	tmp, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ldflags := strings.Join(quoteAll(c.Ldflags), " ")
	args := []string{"build", "-trimpath", "-o", tmp + "/", "-ldflags", ldflags}
	built := map[string]string{} // binary name -> file in tmp
	for _, name := range missing {
		if pkg, ok := c.Cmds[name]; ok {
			args = append(args, pkg)
			built[name] = filepath.Join(tmp, binaryName(pkg))
		}
	}
	if len(built) > 0 {
		if err := goCmd(ctx, src, args...); err != nil {
			return fmt.Errorf("building %s: %w", strings.Join(missing, ", "), err)
		}
	}
	for _, name := range missing {
		if pkg, ok := c.Tests[name]; ok {
			built[name] = filepath.Join(tmp, name)
			if err := goCmd(ctx, src, "test", "-c", "-vet=off", "-trimpath", "-o", built[name], "-ldflags", ldflags, pkg); err != nil {
				return fmt.Errorf("building %s: %w", name, err)
			}
		}
	}
	for _, name := range missing {
		if err := os.Rename(built[name], filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	opts.Log("built %s in %s", strings.Join(missing, ", "), time.Since(start).Round(time.Second))
	return nil
}

// binaryName is the file name go build gives the main package pkg: its last path element, or
// the one before a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
func binaryName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return elems[len(elems)-2]
	}
	return last
}

// writeWrapper creates (once) a module that requires c.Path, turns each of its relative replace
// directives (which make it refuse `go install`) into the published module of the same path,
// and adds c.Pins.
func (c Module) writeWrapper(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := goOutput(ctx, dir, "mod", "download", "-json", c.Path+"@"+c.Version)
	if err != nil {
		return err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("decoding go mod download output: %w", err)
	}
	if info.Error != "" {
		return errors.New(info.Error)
	}
	upstream, err := os.ReadFile(info.GoMod)
	if err != nil {
		return err
	}
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, pkg := range slices.Sorted(maps.Values(c.all())) {
		fmt.Fprintf(&tools, "\t_ %q\n", pkg)
	}
	tools.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(c.wrapperGoMod(filepath.Base(dir), upstream)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return err
	}
	return goCmd(ctx, dir, "mod", "tidy")
}

// wrapperGoMod is the wrapper module's go.mod, named after its directory name, for the
// upstream go.mod: the upstream go directive, a require of c, and the replace directives.
func (c Module) wrapperGoMod(name string, upstream []byte) string {
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module portico.invalid/k8sbin/%s\n\ngo %s\n\nrequire %s %s\n\n", strings.NewReplacer("@", "-", ".", "-").Replace(name), goDirective(upstream), c.Path, c.Version)
	if c.StagingVersion != "" {
		for _, path := range relativeReplaces(upstream) {
			fmt.Fprintf(&gomod, "replace %s => %s %s\n", path, path, c.StagingVersion)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(c.Pins)) {
		fmt.Fprintf(&gomod, "replace %s => %s %s\n", path, path, c.Pins[path])
	}
	return gomod.String()
}

// relativeReplaces lists module paths that go.mod replaces with a local directory.
func relativeReplaces(gomod []byte) []string {
	var paths []string
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "replace (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "replace "):
			line = strings.TrimPrefix(line, "replace ")
		case !inBlock:
			continue
		}
		lhs, rhs, ok := strings.Cut(line, "=>")
		if !ok {
			continue
		}
		target := strings.Fields(rhs)
		if len(target) != 1 || !strings.HasPrefix(target[0], ".") || strings.Contains(target[0], "FORBIDDEN") {
			continue
		}
		paths = append(paths, strings.Fields(lhs)[0])
	}
	return paths
}

func goDirective(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "go" {
			return f[1]
		}
	}
	return "1.24.0"
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

func goEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
}

func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, goEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return nil
}

func goOutput(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.Bytes(), 4000))
	}
	return out, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// lock takes an exclusive flock on path, waiting until ctx ends.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening build lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
