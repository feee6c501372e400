package nodes

// The images the nodes run, built without a registry or Docker: a static Go binary as the only
// file of a one-layer image (github.com/google/go-containerregistry), written as an image
// archive that `ctr images import` loads into each node's containerd. This file is meant to
// move onto internal/ociimage once that package exists.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageRegistry names the images; nothing resolves it, so a pull can never succeed by accident.
const imageRegistry = "portico.invalid/e2e/"

// Image is an image archive ready to import.
type Image struct {
	// Ref is the image's name, e.g. portico.invalid/e2e/echoserver:0123abcd (the tag is a hash
	// of the binary, so a changed program gets a new name).
	Ref string
	// Archive is the image archive (docker-save layout) on disk.
	Archive string
}

// buildStatic builds main package pkg (a path relative to the module root, like
// "e2e/tools/pause") as a static binary into dir.
func buildStatic(ctx context.Context, moduleDir, pkg, dir string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// binaryImage writes an image holding bin as /NAME (its entrypoint) to dir/NAME.tar.
func binaryImage(bin, dir string) (Image, error) {
	content, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, fmt.Errorf("reading %s: %w", bin, err)
	}
	base := filepath.Base(bin)
	sum := sha256.Sum256(content)
	ref := imageRegistry + base + ":" + hex.EncodeToString(sum[:6])
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	hdr := &tar.Header{Name: base, Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return Image{}, err
	}
	if _, err := tw.Write(content); err != nil {
		return Image{}, err
	}
	if err := tw.Close(); err != nil {
		return Image{}, err
	}
	// Stored, not compressed: the archive only travels to local containerds, and each of
	// them unpacks it at every start (gzip at the default level made importing CoreDNS the
	// slowest step of a cluster's start on a loaded machine).
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	}, tarball.WithCompressionLevel(gzip.NoCompression))
	if err != nil {
		return Image{}, fmt.Errorf("making layer of %s: %w", base, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return Image{}, fmt.Errorf("making image of %s: %w", base, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: []string{"/" + base}, Env: []string{"PATH=/"}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return Image{}, fmt.Errorf("configuring image of %s: %w", base, err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return Image{}, fmt.Errorf("parsing %s: %w", ref, err)
	}
	archive := filepath.Join(dir, base+".tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return Image{}, fmt.Errorf("writing image archive %s: %w", archive, err)
	}
	return Image{Ref: ref, Archive: archive}, nil
}
