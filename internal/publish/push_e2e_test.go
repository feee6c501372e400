//go:build e2e

package publish

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmregistry "helm.sh/helm/v4/pkg/registry"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

// elfMachines are the ELF machines of the architectures pushed.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestPush runs Push (what `make push` runs) against go-containerregistry's registry on
// 127.0.0.1 and reads back what a node and a user would: each component's index has a
// linux/amd64 and a linux/arm64 image whose config names its architecture and whose programs
// (the Go binaries; the agent's xtables-nft-multi and conntrack from Debian's packages) are
// ELF files of that architecture; each image has an SPDX SBOM referring to it, listing the Go
// modules and the Debian packages of its architecture; the chart pulls from oci:// with the
// version and appVersion the images' version gives.
func TestPush(t *testing.T) {
	if out, err := exec.Command("apt-cache", "show", "--no-all-versions", "libc6:arm64").CombinedOutput(); err != nil {
		t.Fatalf("apt knows no arm64 packages (%v: %s); as root run `make prereqs`, which adds the architecture (dpkg --add-architecture arm64) and updates apt's lists", err, bytes.TrimSpace(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	const version = "v1.2.3"
	res, err := Push(ctx, Options{
		Registry: host + "/portico", Insecure: true, Version: version, Chart: "../../deploy/chart/portico",
		DebCache: filepath.Join(prereq.CacheDir(), "debs"), Work: t.TempDir(), Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s, pushed in %s", res.BuildTime.Round(time.Second), res.PushTime.Round(100*time.Millisecond))
	opts := []remote.Option{remote.WithContext(ctx)}
	for _, n := range images.Binaries {
		tag, err := name.NewTag(host+"/portico/"+n+":"+version, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(tag, opts...)
		if err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var archs []string
		for _, d := range im.Manifests {
			if d.Platform == nil || d.Platform.OS != "linux" {
				t.Errorf("%s: manifest %s has platform %v, want linux/...", tag, d.Digest, d.Platform)
				continue
			}
			arch := d.Platform.Architecture
			archs = append(archs, arch)
			img, err := remote.Image(tag.Context().Digest(d.Digest.String()), opts...)
			if err != nil {
				t.Fatalf("%s linux/%s: %v", tag, arch, err)
			}
			size := checkImage(t, n, arch, img)
			t.Logf("%s linux/%s %s %.1f MB", tag, arch, d.Digest, float64(size)/1e6)
			checkSBOM(t, tag.Context().Digest(d.Digest.String()), n, version, arch, opts)
		}
		slices.Sort(archs)
		if !slices.Equal(archs, []string{"amd64", "arm64"}) {
			t.Errorf("%s: platforms %v, want amd64 and arm64", tag, archs)
		}
	}

	// The chart, as `helm pull oci://.../charts/portico --version 1.2.3` gets it.
	if res.Chart != "oci://"+host+"/portico/charts/portico" || res.ChartVersion != "1.2.3" {
		t.Errorf("chart pushed as %s --version %s, want oci://%s/portico/charts/portico --version 1.2.3", res.Chart, res.ChartVersion, host)
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(host + "/portico/charts/portico:1.2.3")
	if err != nil {
		t.Fatalf("pulling the chart: %v", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != version {
		t.Errorf("chart version %q appVersion %q, want 1.2.3 and %s (the images' tag: the chart's default image tag)", ch.Metadata.Version, ch.Metadata.AppVersion, version)
	}
	if len(ch.CRDObjects()) == 0 || len(ch.Templates) == 0 {
		t.Errorf("the pulled chart has %d CRDs and %d templates", len(ch.CRDObjects()), len(ch.Templates))
	}
}

// checkImage checks the platform image of binary n: its config's platform, and that its Go
// binaries (and the agent's Debian programs) are ELF files of arch. It returns the image's
// compressed size.
func checkImage(t *testing.T, n, arch string, img v1.Image) int64 {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("%s linux/%s: config says %s/%s", n, arch, cf.OS, cf.Architecture)
	}
	want := map[string]bool{"usr/local/bin/" + n: false}
	if n == "portico-agent" {
		for _, p := range []string{"usr/local/bin/" + images.AgentBGP, "usr/sbin/xtables-nft-multi", "usr/sbin/conntrack"} {
			want[p] = false
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, l := range layers {
		s, _ := l.Size()
		size += s
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := want[h.Name]; !ok || h.Typeflag != tar.TypeReg {
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Errorf("%s linux/%s: /%s: %v", n, arch, h.Name, err)
				continue
			}
			if f.Machine != elfMachines[arch] {
				t.Errorf("%s linux/%s: /%s is for %s, want %s", n, arch, h.Name, f.Machine, elfMachines[arch])
			}
			want[h.Name] = true
		}
		rc.Close()
	}
	for p, found := range want {
		if !found {
			t.Errorf("%s linux/%s: no /%s", n, arch, p)
		}
	}
	return size
}

// checkSBOM finds the SBOM that refers to the image d (the referrers API, or its tag
// fallback) and checks it lists the Go modules and, for the agent, Debian packages of arch.
func checkSBOM(t *testing.T, d name.Digest, n, version, arch string, opts []remote.Option) {
	t.Helper()
	refs, err := remote.Referrers(d, opts...)
	if err != nil {
		t.Fatalf("%s linux/%s: referrers: %v", n, arch, err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var sboms []v1.Descriptor
	for _, r := range rm.Manifests {
		if r.ArtifactType == string(SBOMMediaType) {
			sboms = append(sboms, r)
		}
	}
	if len(sboms) != 1 {
		t.Fatalf("%s linux/%s: %d SBOMs refer to the image (referrers %+v), want 1", n, arch, len(sboms), rm.Manifests)
	}
	art, err := remote.Image(d.Context().Digest(sboms[0].Digest.String()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := art.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s linux/%s: SBOM artifact layers %d, %v", n, arch, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var doc SPDXDocument
	if err := json.NewDecoder(rc).Decode(&doc); err != nil {
		t.Fatalf("%s linux/%s: SBOM: %v", n, arch, err)
	}
	mods := doc.ModuleNames()
	for _, m := range []string{"github.com/portico-lb/portico@" + version, "k8s.io/client-go@"} {
		if !slices.ContainsFunc(mods, func(s string) bool { return strings.HasPrefix(s, m) }) {
			t.Errorf("%s linux/%s: the SBOM's %d Go modules lack %s", n, arch, len(mods), m)
		}
	}
	if doc.SPDXVersion != "SPDX-2.3" || !strings.Contains(doc.Name, "linux/"+arch) {
		t.Errorf("%s linux/%s: SBOM %s named %q", n, arch, doc.SPDXVersion, doc.Name)
	}
	if n != "portico-agent" {
		return
	}
	var debs []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			if strings.HasPrefix(r.ReferenceLocator, "pkg:deb/") {
				debs = append(debs, r.ReferenceLocator)
			}
		}
	}
	wantArch := fmt.Sprintf("?arch=%s", images.DebianArch(arch))
	if !slices.ContainsFunc(debs, func(s string) bool {
		return strings.HasPrefix(s, "pkg:deb/debian/iptables@") && strings.HasSuffix(s, wantArch)
	}) {
		t.Errorf("%s linux/%s: the SBOM's Debian packages %v lack iptables for %s", n, arch, debs, images.DebianArch(arch))
	}
}
