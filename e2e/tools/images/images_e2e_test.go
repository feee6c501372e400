//go:build e2e

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

// build runs Build into fresh output and work directories, with the shared package cache.
func build(t *testing.T, ctx context.Context) []images.Result {
	t.Helper()
	res, err := images.Build(ctx, images.Options{
		Repo: "example.org/portico", Version: "v0.0.0-test", Out: t.TempDir(), Work: t.TempDir(),
		DebCache: filepath.Join(prereq.CacheDir(), "debs"), Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestImages builds every image twice (fresh work directories, the same source and Debian
// packages): the digests and the archives are the same. Then, as root, it runs the agent
// image's iptables (xtables-nft-multi, nf_tables) and conntrack from the image's root
// filesystem with chroot, and programs rules with the extensions the agent's dataplane uses
// into a network namespace of its own, reading them back with the image's iptables-save.
func TestImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	first, second := build(t, ctx), build(t, ctx)
	if len(first) != len(images.Binaries) || len(second) != len(images.Binaries) {
		t.Fatalf("built %d and %d images, want %d", len(first), len(second), len(images.Binaries))
	}
	var agent images.Result
	for i := range first {
		a, b := first[i], second[i]
		t.Logf("%s %s %.1f MB", a.Ref, a.Digest, float64(a.Size)/1e6)
		if a.Digest != b.Digest {
			t.Errorf("%s: two builds gave %s and %s", a.Name, a.Digest, b.Digest)
		}
		x, _ := os.ReadFile(a.Path)
		y, _ := os.ReadFile(b.Path)
		if !bytes.Equal(x, y) {
			t.Errorf("%s: the two archives differ", a.Name)
		}
		if a.Name == "portico-agent" {
			agent = a
		}
	}
	if agent.Path == "" {
		t.Fatal("no portico-agent image")
	}
	if os.Geteuid() != 0 {
		if os.Getenv(prereq.SkipPrivilegedEnv) != "" {
			t.Skip("chroot and network namespaces need root")
		}
		t.Fatal("the agent image's iptables check needs root (chroot, a network namespace); " + prereq.SkipPrivilegedEnv + "=1 skips it")
	}
	root := unpackImage(t, agent.Path)

	out := run(t, ctx, "chroot", root, "/usr/sbin/iptables", "--version")
	if !strings.Contains(out, "nf_tables") {
		t.Errorf("iptables --version = %q, want the nf_tables backend", out)
	}
	out = run(t, ctx, "chroot", root, "/usr/sbin/conntrack", "--version")
	if !strings.Contains(out, "conntrack") {
		t.Errorf("conntrack --version = %q", out)
	}
	out = run(t, ctx, "chroot", root, "/usr/local/bin/portico-agent", "--version")
	if strings.TrimSpace(out) != "portico-agent v0.0.0-test" {
		t.Errorf("portico-agent --version = %q, want the image's tag", out)
	}
	out = run(t, ctx, "chroot", root, "/usr/local/bin/portico-agent-bgp", "--version")
	if strings.TrimSpace(out) != "portico-agent v0.0.0-test" {
		t.Errorf("portico-agent-bgp --version = %q, want the image's tag", out)
	}

	ns := fmt.Sprintf("portico-e2e-img-%d", os.Getpid())
	run(t, ctx, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	const rules = `*nat
:PORTICO-TEST - [0:0]
-A PORTICO-TEST -m comment --comment "svc a" -m statistic --mode random --probability 0.5 -j MARK --set-xmark 0x4000/0x4000
-A PORTICO-TEST -p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DNAT --to-destination 198.19.0.10:8080
-A PORTICO-TEST -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully
-A PORTICO-TEST -m recent --name portico --rcheck --seconds 10800 --reap --rsource -j RETURN
COMMIT
*filter
:PORTICO-TEST-F - [0:0]
-A PORTICO-TEST-F -m conntrack --ctstate INVALID -j DROP
-A PORTICO-TEST-F -p udp -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable
COMMIT
`
	for _, family := range []string{"iptables", "ip6tables"} {
		r := rules
		if family == "ip6tables" {
			r = strings.ReplaceAll(strings.ReplaceAll(r, "198.19.0.10:8080", "[fd00:c613::10]:8080"), "icmp-port-unreachable", "icmp6-port-unreachable")
		}
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "chroot", root, "/usr/sbin/"+family+"-restore", "--noflush")
		cmd.Stdin = strings.NewReader(r)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s-restore in the image: %v: %s", family, err, out)
		}
		saved := run(t, ctx, "ip", "netns", "exec", ns, "chroot", root, "/usr/sbin/"+family+"-save")
		for _, want := range []string{"--comment \"svc a\"", "statistic --mode random", "--dst-type LOCAL", "MASQUERADE --random-fully", "--rcheck", "--ctstate INVALID", "--reject-with icmp"} {
			if !strings.Contains(saved, want) {
				t.Errorf("%s-save from the image lacks %q:\n%s", family, want, saved)
			}
		}
	}
}

// run runs a command and returns its output, failing the test on error.
func run(t *testing.T, ctx context.Context, name string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unpackImage unpacks the one image of the OCI archive at path into a directory: its root
// filesystem.
func unpackImage(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	layoutDir := filepath.Join(dir, "layout")
	untar(t, mustOpen(t, path), layoutDir)
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index: %v (%d manifests)", err, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	rc := mutate.Extract(img)
	defer rc.Close()
	untar(t, rc, rootfs)
	return rootfs
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(data)
}

// untar writes a tar stream's directories, files and symbolic links under dir.
func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode).Perm())
			}
		default:
			t.Fatalf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
