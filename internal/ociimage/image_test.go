package ociimage

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testImage builds an image from in-memory entries and a host tree made in dir, with the host
// files' times and the order they are added depending on order.
func testImage(t *testing.T, dir string, reverse bool) Image {
	t.Helper()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "sub/b"} {
		if err := os.WriteFile(filepath.Join(tree, f), []byte("content of "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(tree, "link")); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	var base, app Layer
	adds := []func() error{
		func() error {
			return base.AddFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"))
		},
		func() error { return base.AddDir("/tmp", 0o777|fs.ModeSticky, Owner{}) },
		func() error { return base.AddHostTree("/usr/share/test", tree) },
		func() error {
			return app.AddFileOwned("/app/bin", 0o755, Owner{UID: 65532, GID: 65532}, []byte("#!binary"))
		},
		func() error { return app.AddSymlink("/usr/bin/bin", "/app/bin") },
	}
	if reverse {
		for i := len(adds) - 1; i >= 0; i-- {
			if err := adds[i](); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		for _, add := range adds {
			if err := add(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return Image{
		Layers:       []*Layer{&base, &app},
		Entrypoint:   []string{"/app/bin"},
		Cmd:          []string{"--help"},
		User:         "65532:65532",
		Env:          []string{"PATH=/usr/bin"},
		Labels:       map[string]string{"org.opencontainers.image.version": "v0.0.1"},
		OS:           "linux",
		Architecture: "amd64",
	}
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two builds of the same inputs, added in a different order, from host files with different
// modification times, give the same image digest; written archives are byte for byte equal.
func TestBuildReproducible(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	img1, err := testImage(t, dir1, false).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir2), Epoch, Epoch); err != nil {
		t.Fatal(err)
	}
	spec2 := testImage(t, dir2, true)
	for _, f := range []string{"tree/a", "tree/sub/b"} {
		if err := os.Chtimes(filepath.Join(dir2, f), Epoch, Epoch); err != nil {
			t.Fatal(err)
		}
	}
	img2, err := spec2.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := digest(t, img1), digest(t, img2); d1 != d2 {
		t.Fatalf("digests differ: %s and %s", d1, d2)
	}
	out := t.TempDir()
	a1, a2 := filepath.Join(out, "1.tar"), filepath.Join(out, "2.tar")
	if err := WriteArchive(a1, "example.org/test/app:v0.0.1", img1); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(a2, "example.org/test/app:v0.0.1", img2); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(a1)
	b2, _ := os.ReadFile(a2)
	if string(b1) != string(b2) || len(b1) == 0 {
		t.Fatalf("archives differ (%d and %d bytes)", len(b1), len(b2))
	}
	// A different input is a different image.
	spec3 := testImage(t, t.TempDir(), false)
	spec3.User = "0:0"
	img3, err := spec3.Build()
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, img3) == digest(t, img1) {
		t.Fatal("a different user gave the same digest")
	}
}

// The archive reads back with its tag, config and files: sorted, parents first, fixed times,
// numeric owners.
func TestWriteArchiveReadsBack(t *testing.T) {
	img, err := testImage(t, t.TempDir(), false).Build()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.tar")
	const ref = "example.org/test/app:v0.0.1"
	if err := WriteArchive(path, ref, img); err != nil {
		t.Fatal(err)
	}
	back := readArchive(t, path, ref)
	if digest(t, back) != digest(t, img) {
		t.Fatal("archive's image digest differs from the built image's")
	}
	mt, _ := back.MediaType()
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config; !reflect.DeepEqual(got.Entrypoint, []string{"/app/bin"}) || got.User != "65532:65532" ||
		got.Labels["org.opencontainers.image.version"] != "v0.0.1" || !reflect.DeepEqual(got.Env, []string{"PATH=/usr/bin"}) {
		t.Errorf("config = %+v", got)
	}
	if !cf.Created.Time.Equal(Epoch) || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("created %v os %s arch %s", cf.Created, cf.OS, cf.Architecture)
	}
	type file struct {
		name     string
		typ      byte
		mode     int64
		uid      int
		linkname string
	}
	var got []file
	rc := mutate.Extract(back)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(Epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		got = append(got, file{h.Name, h.Typeflag, h.Mode, h.Uid, h.Linkname})
	}
	want := []file{ // the upper layer first (mutate.Extract), each layer sorted
		{"app", tar.TypeDir, 0o755, 0, ""},
		{"app/bin", tar.TypeReg, 0o755, 65532, ""},
		{"usr", tar.TypeDir, 0o755, 0, ""},
		{"usr/bin", tar.TypeDir, 0o755, 0, ""},
		{"usr/bin/bin", tar.TypeSymlink, 0o777, 0, "/app/bin"},
		{"etc", tar.TypeDir, 0o755, 0, ""},
		{"etc/passwd", tar.TypeReg, 0o644, 0, ""},
		{"tmp", tar.TypeDir, 0o1777, 0, ""},
		{"usr/share", tar.TypeDir, 0o755, 0, ""},
		{"usr/share/test", tar.TypeDir, 0o755, 0, ""},
		{"usr/share/test/a", tar.TypeReg, 0o644, 0, ""},
		{"usr/share/test/link", tar.TypeSymlink, 0o777, 0, "a"},
		{"usr/share/test/sub", tar.TypeDir, 0o755, 0, ""},
		{"usr/share/test/sub/b", tar.TypeReg, 0o644, 0, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
}

func TestBadPaths(t *testing.T) {
	var l Layer
	for _, p := range []string{"relative", "/", ""} {
		if err := l.AddFile(p, 0o644, nil); err == nil {
			t.Errorf("AddFile(%q) succeeded", p)
		}
	}
	if err := l.AddHostFile("/x", t.TempDir()); err == nil {
		t.Error("AddHostFile of a directory succeeded")
	}
	if _, err := (Image{Layers: []*Layer{&l}}).Build(); err != nil {
		t.Errorf("building an empty layer: %v", err)
	}
	if err := WriteArchive(filepath.Join(t.TempDir(), "x.tar"), "Not A Tag!", nil); err == nil {
		t.Error("WriteArchive with a bad reference succeeded")
	}
}

// readArchive unpacks the archive at path and returns its one image, checking that the index
// names it ref.
func readArchive(t *testing.T, path, ref string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(Epoch) {
			t.Errorf("archive entry %s: mtime %v", h.Name, h.ModTime)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index holds %d manifests, want 1", len(im.Manifests))
	}
	tag, _ := name.NewTag(ref)
	if a := im.Manifests[0].Annotations; a[AnnotationContainerdName] != tag.Name() || a[AnnotationRefName] != tag.TagStr() {
		t.Errorf("index annotations %v, want the name %s", a, ref)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestStoredLayers: a Stored image's layer is gzip-framed but not compressed (larger than the
// compressed one for compressible content), and both hold the same files (the same diff ID).
func TestStoredLayers(t *testing.T) {
	sizes := map[bool]int64{}
	diffIDs := map[bool]v1.Hash{}
	for _, stored := range []bool{false, true} {
		l := &Layer{}
		if err := l.AddFile("/data", 0o644, make([]byte, 1<<16)); err != nil {
			t.Fatal(err)
		}
		img, err := Image{Layers: []*Layer{l}, Stored: stored}.Build()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %v, %v", layers, err)
		}
		if sizes[stored], err = layers[0].Size(); err != nil {
			t.Fatal(err)
		}
		if diffIDs[stored], err = layers[0].DiffID(); err != nil {
			t.Fatal(err)
		}
	}
	if sizes[true] < 1<<16 || sizes[false] >= sizes[true] {
		t.Errorf("layer sizes: compressed %d, stored %d; want stored at least the 64 KiB of zeros and compressed smaller", sizes[false], sizes[true])
	}
	if diffIDs[true] != diffIDs[false] {
		t.Errorf("diff IDs differ: %v vs %v", diffIDs[false], diffIDs[true])
	}
}
