package images

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/portico-lb/portico/internal/ociimage"
)

// Options say what to build and where.
type Options struct {
	// Repo prefixes every image name: <Repo>/<binary>:<Version>.
	Repo string
	// Version is the tag and what the binaries print with --version.
	Version string
	// Out is the directory the archives are written to, one <binary>.tar each (Build).
	Out string
	// Arch is the images' architecture as GOARCH names it (amd64, arm64); empty: this build's.
	Arch string
	// Work holds the binaries and unpacked packages while building (removed by the caller).
	Work string
	// DebCache keeps downloaded Debian packages across runs.
	DebCache string
	// Only builds just these binaries; empty: all.
	Only []string
	// Stored writes the layers uncompressed (gzip-framed, ociimage.Image.Stored): for archives
	// that only go to local containerds, which unpack them at every import.
	Stored bool
	Log    func(string, ...any)
}

// Result is one written image.
type Result struct {
	Name, Ref, Path string
	Digest          v1.Hash
	Size            int64 // the archive's size in bytes
	Packages        map[string]string
}

// Binaries are the images built, one per binary.
var Binaries = []string{"portico-agent", "portico-controller", "portico-ccm"}

// nonRoot is the user the controller and ccm images run as.
const nonRoot = 65532

// pathEnv is every image's PATH.
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// iptablesNames are the names portico-agent runs iptables by (config.Agent's IPTablesPath and
// its -save/-restore siblings), all xtables-nft-multi with the nf_tables backend, plus the
// -nft names Debian's package ships.
var iptablesNames = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// Built is one image built in memory, for one architecture.
type Built struct {
	Name, Ref string
	Arch      string // GOARCH
	Image     v1.Image
	// Binaries are the host paths of the image's Go binaries (under Options.Work, which the
	// caller removes), for reading their build information.
	Binaries []string
	// Packages are the Debian packages the image's files come from, with their versions.
	Packages map[string]string
}

// Build builds the images and writes their archives.
func Build(ctx context.Context, o Options) ([]Result, error) {
	built, err := Images(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var out []Result
	for _, b := range built {
		file := filepath.Join(o.Out, b.Name+".tar")
		if err := ociimage.WriteArchive(file, b.Ref, b.Image); err != nil {
			return nil, err
		}
		d, err := b.Image.Digest()
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		out = append(out, Result{Name: b.Name, Ref: b.Ref, Path: file, Digest: d, Size: fi.Size(), Packages: b.Packages})
	}
	return out, nil
}

// Images builds the images of o.Arch (empty: this build's architecture) in memory: the
// binaries cross-compiled (GOARCH), the agent's Debian packages those of the architecture
// (apt must know it: `dpkg --add-architecture`, which `make prereqs` runs).
func Images(ctx context.Context, o Options) ([]Built, error) {
	names := Binaries
	if len(o.Only) > 0 {
		names = o.Only
	}
	for _, n := range names {
		if !slices.Contains(Binaries, n) {
			return nil, fmt.Errorf("no image %q (images: %s)", n, strings.Join(Binaries, ", "))
		}
	}
	arch := valueOr(o.Arch, runtime.GOARCH)
	work := filepath.Join(o.Work, arch)
	bins := filepath.Join(work, "bin")
	if err := buildBinaries(ctx, bins, arch, o.Version, names); err != nil {
		return nil, err
	}
	debs, err := newDebRoot(o.DebCache, filepath.Join(work, "debs"), arch, o.Log)
	if err != nil {
		return nil, err
	}
	base, err := baseLayer(ctx, debs)
	if err != nil {
		return nil, err
	}
	var out []Built
	for _, n := range names {
		layers := []*ociimage.Layer{base}
		user := fmt.Sprintf("%d:%d", nonRoot, nonRoot)
		var pkgs map[string]string
		binaries := []string{filepath.Join(bins, n)}
		if n == "portico-agent" {
			// The agent runs as root: its capabilities (NET_ADMIN, NET_RAW) are granted to the
			// container's root user; a non-root user would need ambient capabilities.
			user = "0:0"
			l, p, err := dataplaneLayer(ctx, debs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			layers, pkgs = append(layers, l), p
			binaries = append(binaries, filepath.Join(bins, AgentBGP))
		}
		var bin ociimage.Layer
		for _, b := range binaries {
			if err := bin.AddHostFile("/usr/local/bin/"+filepath.Base(b), b); err != nil {
				return nil, err
			}
		}
		layers = append(layers, &bin)
		labels := map[string]string{
			"org.opencontainers.image.title":   n,
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.source":  "https://github.com/portico-lb/portico",
		}
		if len(pkgs) > 0 {
			labels[PackagesLabel] = packagesLabel(pkgs)
		}
		img, err := ociimage.Image{
			Layers:       layers,
			Entrypoint:   []string{"/usr/local/bin/" + n},
			User:         user,
			Env:          []string{pathEnv},
			Labels:       labels,
			Architecture: arch,
			Stored:       o.Stored,
		}.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		ref := fmt.Sprintf("%s/%s:%s", o.Repo, n, o.Version)
		out = append(out, Built{Name: n, Ref: ref, Arch: arch, Image: img, Binaries: binaries, Packages: pkgs})
	}
	return out, nil
}

func valueOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// PackagesLabel is the image label that lists the Debian packages an image's files come
// from, as package=version (the versions the mirror served at the build), comma-separated in
// name order.
const PackagesLabel = "io.portico-lb.debian-packages"

func packagesLabel(pkgs map[string]string) string {
	var list []string
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		list = append(list, p+"="+pkgs[p])
	}
	return strings.Join(list, ",")
}

// AgentBGP is the second binary of the portico-agent image: portico-agent with the BGP
// announcer (GoBGP). The image's portico-agent is built with the tag portico_nobgp, so an agent
// that announces by layer 2 or not at all does not map GoBGP's 40 MB into memory (34 MB of
// an idle agent's RSS here, the kernel mapping an executable's pages in fault-around windows and large folios);
// the chart runs AgentBGP when agent.announce has bgp.
const AgentBGP = "portico-agent-bgp"

// buildBinaries builds the static binaries for linux/arch (CGO_ENABLED=0, -trimpath, no VCS
// stamp, stripped) with the version stamped as make build does; portico-agent twice: without the BGP announcer
// (portico-agent) and with it (AgentBGP).
func buildBinaries(ctx context.Context, dir, arch, version string, names []string) error {
	flags := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags",
		"-s -w -X github.com/portico-lb/portico/internal/version.version=" + version}
	var pkgs []string
	for _, n := range names {
		if n == "portico-agent" {
			lean := append(slices.Clone(flags), "-tags", "portico_nobgp", "-o", dir+"/portico-agent", "github.com/portico-lb/portico/cmd/portico-agent")
			if err := goBuild(ctx, arch, lean); err != nil {
				return err
			}
			if err := goBuild(ctx, arch, append(slices.Clone(flags), "-o", dir+"/"+AgentBGP, "github.com/portico-lb/portico/cmd/portico-agent")); err != nil {
				return err
			}
			continue
		}
		pkgs = append(pkgs, "github.com/portico-lb/portico/cmd/"+n)
	}
	if len(pkgs) == 0 {
		return nil
	}
	return goBuild(ctx, arch, append(append(flags, "-o", dir+"/"), pkgs...))
}

func goBuild(ctx context.Context, arch string, args []string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, stderr.String())
	}
	return nil
}

// baseLayer holds what every image has: /etc/passwd and /etc/group with root and nonroot
// (65532), the CA certificates (Debian's ca-certificates, Mozilla's set, concatenated in name
// order as update-ca-certificates does), and /tmp.
func baseLayer(ctx context.Context, debs *debRoot) (*ociimage.Layer, error) {
	var l ociimage.Layer
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRoot, nonRoot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRoot)
	if err := debs.add(ctx, "ca-certificates"); err != nil {
		return nil, err
	}
	certs, err := filepath.Glob(filepath.Join(debs.dir, "ca-certificates", "usr/share/ca-certificates/mozilla", "*.crt"))
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("no certificates in the ca-certificates package: %v", err)
	}
	slices.Sort(certs)
	var bundle bytes.Buffer
	for _, c := range certs {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, err
		}
		bundle.Write(bytes.TrimRight(b, "\n"))
		bundle.WriteByte('\n')
	}
	for _, err := range []error{
		l.AddFile("/etc/passwd", 0o644, []byte(passwd)),
		l.AddFile("/etc/group", 0o644, []byte(group)),
		l.AddFile("/etc/ssl/certs/ca-certificates.crt", 0o644, bundle.Bytes()),
		l.AddDir("/home/nonroot", 0o700, ociimage.Owner{UID: nonRoot, GID: nonRoot}),
		l.AddDir("/root", 0o700, ociimage.Owner{}),
		l.AddDir("/tmp", 0o777|fs.ModeSticky, ociimage.Owner{}),
	} {
		if err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// dataplaneLayer holds what portico-agent's dataplane runs, from Debian's packages: iptables
// (xtables-nft-multi under every name the agent uses, its extensions) and conntrack, with the
// loader and every library they need. It returns the packages used.
func dataplaneLayer(ctx context.Context, debs *debRoot) (*ociimage.Layer, map[string]string, error) {
	for _, p := range []string{"iptables", "conntrack"} {
		if err := debs.add(ctx, p); err != nil {
			return nil, nil, err
		}
	}
	f := &files{root: debs, regular: map[string]string{}, links: map[string]string{}}
	want := []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack"}
	for _, suffix := range []string{"", "-save", "-restore"} {
		want = append(want, "/usr/sbin/iptables-nft"+suffix, "/usr/sbin/ip6tables-nft"+suffix)
	}
	extDir := path.Join("/usr/lib", debs.multi, "xtables")
	exts, err := filepath.Glob(filepath.Join(debs.dir, "iptables", extDir, "*.so"))
	if err != nil || len(exts) == 0 {
		return nil, nil, fmt.Errorf("no xtables extensions in the iptables package under %s", extDir)
	}
	for _, e := range exts {
		want = append(want, path.Join(extDir, filepath.Base(e)))
	}
	slices.Sort(want)
	for _, p := range want {
		if err := f.take(ctx, p); err != nil {
			return nil, nil, err
		}
	}
	l, err := f.layer()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range iptablesNames {
		if err := l.AddSymlink("/usr/sbin/"+n, "xtables-nft-multi"); err != nil {
			return nil, nil, err
		}
	}
	// Debian's loader path (/lib64/ld-linux-x86-64.so.2) is a link libc6 ships; /run holds
	// the xtables lock the pod mounts.
	if err := l.AddDir("/run", 0o755, ociimage.Owner{}); err != nil {
		return nil, nil, err
	}
	return l, f.packages(debs), nil
}
