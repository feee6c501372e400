package nodes

// The images the nodes run, built without a registry or Docker: a static Go binary as the only
// file of a one-layer image (github.com/google/go-containerregistry), written as an image
// archive (internal/ociimage) that `ctr images import` loads into each node's containerd.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/portico-lb/portico/internal/ociimage"
)

// imageRegistry names the images; nothing resolves it, so a pull can never succeed by accident.
const imageRegistry = "portico.invalid/e2e/"

// Image is an image archive ready to import.
type Image struct {
	// Ref is the image's name, e.g. portico.invalid/e2e/echoserver:0123abcd (the tag is a hash
	// of the binary, so a changed program gets a new name).
	Ref string
	// Archive is the image archive (an OCI layout in one tar) on disk.
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
	layer := &ociimage.Layer{}
	if err := layer.AddFile("/"+base, 0o755, content); err != nil {
		return Image{}, err
	}
	// Stored, not compressed: the archive only travels to local containerds, and each of
	// them unpacks it at every start (gzip at the default level made importing CoreDNS the
	// slowest step of a cluster's start on a loaded machine).
	img, err := ociimage.Image{Layers: []*ociimage.Layer{layer}, Entrypoint: []string{"/" + base}, Env: []string{"PATH=/"}, Stored: true}.Build()
	if err != nil {
		return Image{}, fmt.Errorf("making image of %s: %w", base, err)
	}
	archive := filepath.Join(dir, base+".tar")
	if err := ociimage.WriteArchive(archive, ref, img); err != nil {
		return Image{}, err
	}
	return Image{Ref: ref, Archive: archive}, nil
}
