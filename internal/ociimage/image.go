package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image describes an image to build.
type Image struct {
	// Layers in order, the first at the bottom.
	Layers []*Layer
	// Entrypoint and Cmd as in the OCI image config.
	Entrypoint, Cmd []string
	// User is the user (and group) the entrypoint runs as, e.g. "65532:65532"; empty: root.
	User string
	// Env holds KEY=value entries.
	Env []string
	// WorkingDir is the entrypoint's working directory; empty: /.
	WorkingDir string
	// Labels are the image config's labels (e.g. org.opencontainers.image.version).
	Labels map[string]string
	// OS and Architecture default to linux and the architecture of this build (GOARCH).
	OS, Architecture string
	// Created is the creation time recorded in the config and every layer entry's
	// modification time; zero means Epoch.
	Created time.Time
	// Stored writes the layers gzip-framed but not compressed: for archives that only travel
	// to a local containerd, which unpacks them at every import (compressing costs more there
	// than it saves).
	Stored bool
}

// Build returns the OCI image (OCI manifest, config and gzip layer media types).
func (im Image) Build() (v1.Image, error) {
	created := im.Created
	if created.IsZero() {
		created = Epoch
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, l := range im.Layers {
		var buf bytes.Buffer
		if err := l.WriteTar(&buf, created); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		data := buf.Bytes()
		opts := []tarball.LayerOption{tarball.WithMediaType(types.OCILayer)}
		if im.Stored {
			opts = append(opts, tarball.WithCompressionLevel(gzip.NoCompression))
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, opts...)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "portico ociimage"}}); err != nil {
			return nil, fmt.Errorf("appending layer %d: %w", i, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = valueOr(im.OS, "linux")
	cf.Architecture = valueOr(im.Architecture, runtime.GOARCH)
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = slices.Clone(im.Entrypoint)
	cf.Config.Cmd = slices.Clone(im.Cmd)
	cf.Config.User = im.User
	cf.Config.Env = slices.Clone(im.Env)
	cf.Config.WorkingDir = im.WorkingDir
	cf.Config.Labels = maps.Clone(im.Labels)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting config: %w", err)
	}
	return img, nil
}

func valueOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// Annotations on the index entry of an archive's image: the reference containerd names the
// image by when it imports the archive, and the OCI reference name (the tag).
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img tagged ref (e.g. "ghcr.io/portico-lb/portico-agent:v1.2.3") to path
// as an OCI image layout in one tar archive (oci-layout, index.json, blobs/sha256/...), which
// `ctr images import` names ref and keeps digest for digest, and `docker load` reads. The
// archive is reproducible: sorted entries, fixed times, root owner. It is written to a
// temporary file renamed into place.
func WriteArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	blobs, index, err := archiveContent(tag, img)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := writeLayoutTar(tmp, blobs, index); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// blob is one content-addressed file of the layout.
type blob struct {
	digest v1.Hash
	open   func() (io.ReadCloser, error)
	size   int64
}

// archiveContent returns the blobs of img (manifest, config, compressed layers) and the
// layout's index.json naming it tag.
func archiveContent(tag name.Tag, img v1.Image) ([]blob, []byte, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("manifest: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	mdigest, msize, err := v1.SHA256(bytes.NewReader(manifest))
	if err != nil {
		return nil, nil, err
	}
	cdigest, csize, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, nil, err
	}
	blobs := []blob{
		{mdigest, opener(manifest), msize},
		{cdigest, opener(config), csize},
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, nil, fmt.Errorf("layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return nil, nil, fmt.Errorf("layer size: %w", err)
		}
		blobs = append(blobs, blob{d, l.Compressed, size})
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, nil, err
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Size:      msize,
			Digest:    mdigest,
			Annotations: map[string]string{
				AnnotationContainerdName: tag.Name(),
				AnnotationRefName:        tag.TagStr(),
			},
		}},
	})
	if err != nil {
		return nil, nil, err
	}
	return blobs, index, nil
}

func opener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// writeLayoutTar writes the OCI layout as a tar stream: directories, blobs sorted by digest,
// index.json and oci-layout, all at Epoch and owned by root.
func writeLayoutTar(w io.Writer, blobs []blob, index []byte) error {
	tw := tar.NewWriter(w)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: Epoch})
	}
	file := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: Epoch}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: wrote %d bytes, want %d", name, n, size)
		}
		return err
	}
	slices.SortFunc(blobs, func(a, b blob) int { return strings.Compare(a.digest.String(), b.digest.String()) })
	blobs = slices.CompactFunc(blobs, func(a, b blob) bool { return a.digest == b.digest })
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	for _, b := range blobs {
		rc, err := b.open()
		if err != nil {
			return fmt.Errorf("blob %s: %w", b.digest, err)
		}
		err = file("blobs/sha256/"+b.digest.Hex, b.size, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("blob %s: %w", b.digest, err)
		}
	}
	if err := file("index.json", int64(len(index)), bytes.NewReader(index)); err != nil {
		return err
	}
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	if err := file("oci-layout", int64(len(layout)), bytes.NewReader(layout)); err != nil {
		return err
	}
	return tw.Close()
}
