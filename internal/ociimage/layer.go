package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Epoch is the modification time of every entry and the creation time of every image unless
// Image.Created says otherwise: the Unix epoch, so that builds are reproducible.
var Epoch = time.Unix(0, 0).UTC()

// Owner is the numeric owner of an entry (no names are recorded).
type Owner struct{ UID, GID int }

// entry is one tar entry of a Layer.
type entry struct {
	typ    byte // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode   int64
	owner  Owner
	data   []byte // TypeReg, from memory
	source string // TypeReg, from a host file (read when the layer is written)
	target string // TypeSymlink
}

// Layer is a set of files, directories and symbolic links to become one image layer. Paths
// are absolute paths inside the image; adding a path twice keeps the last. Parent directories
// are added (mode 0755, owned by root) when not added explicitly. The zero Layer is empty and
// ready to use.
type Layer struct {
	entries map[string]entry
}

func (l *Layer) put(p string, e entry) error {
	clean, err := imagePath(p)
	if err != nil {
		return err
	}
	if l.entries == nil {
		l.entries = map[string]entry{}
	}
	l.entries[clean] = e
	return nil
}

// imagePath checks that p is absolute and returns it cleaned, without the leading slash.
func imagePath(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("image path %q is not absolute", p)
	}
	clean := strings.TrimPrefix(path.Clean(p), "/")
	if clean == "" {
		return "", fmt.Errorf("image path %q is the root directory", p)
	}
	return clean, nil
}

// AddFile adds a regular file with the given content and permission bits, owned by root.
func (l *Layer) AddFile(p string, mode fs.FileMode, data []byte) error {
	return l.AddFileOwned(p, mode, Owner{}, data)
}

// AddFileOwned adds a regular file with the given content, permission bits and owner.
func (l *Layer) AddFileOwned(p string, mode fs.FileMode, owner Owner, data []byte) error {
	return l.put(p, entry{typ: tar.TypeReg, mode: tarMode(mode), owner: owner, data: bytes.Clone(data)})
}

// AddHostFile adds the host file src (following symbolic links) at p, owned by root, with
// src's permission bits. The content is read when the layer is written.
func (l *Layer) AddHostFile(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("adding %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("adding %s: %s is not a regular file", p, src)
	}
	return l.put(p, entry{typ: tar.TypeReg, mode: tarMode(fi.Mode()), source: src})
}

// AddDir adds an empty directory with the given permission bits (and sticky, setuid and
// setgid bits, e.g. 0o777|fs.ModeSticky for /tmp) and owner.
func (l *Layer) AddDir(p string, mode fs.FileMode, owner Owner) error {
	return l.put(p, entry{typ: tar.TypeDir, mode: tarMode(mode), owner: owner})
}

// AddSymlink adds a symbolic link at p pointing to target (kept as given).
func (l *Layer) AddSymlink(p, target string) error {
	return l.put(p, entry{typ: tar.TypeSymlink, mode: 0o777, target: target})
}

// AddHostTree adds the host directory tree src under p: its directories, regular files and
// symbolic links (kept as they are), owned by root, with their permission bits. Other file
// types are an error.
func (l *Layer) AddHostTree(p, src string) error {
	return filepath.WalkDir(src, func(hostPath string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hostPath)
		if err != nil {
			return err
		}
		dst := path.Join(p, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsDir():
			if rel == "." && dst == "/" {
				return nil
			}
			return l.AddDir(dst, fi.Mode(), Owner{})
		case fi.Mode().IsRegular():
			return l.AddHostFile(dst, hostPath)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(hostPath)
			if err != nil {
				return err
			}
			return l.AddSymlink(dst, target)
		default:
			return fmt.Errorf("adding %s: %s is neither a directory, a regular file nor a symbolic link", dst, hostPath)
		}
	})
}

// Paths returns the layer's paths (absolute, sorted), parents included.
func (l *Layer) Paths() []string {
	var out []string
	for _, name := range l.names() {
		out = append(out, "/"+name)
	}
	return out
}

// names returns every entry name, the implied parent directories included, sorted.
func (l *Layer) names() []string {
	seen := map[string]bool{}
	for name := range l.entries {
		for p := name; p != "." && !seen[p]; p = path.Dir(p) {
			seen[p] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// WriteTar writes the layer as an uncompressed tar stream: entries sorted by name, parents
// before children, every time set to mtime, numeric owners only.
func (l *Layer) WriteTar(w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, name := range l.names() {
		e, ok := l.entries[name]
		if !ok {
			e = entry{typ: tar.TypeDir, mode: 0o755}
		}
		hdr := &tar.Header{
			Typeflag: e.typ,
			Name:     name,
			Mode:     e.mode,
			Uid:      e.owner.UID,
			Gid:      e.owner.GID,
			ModTime:  mtime,
		}
		var body io.Reader
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.target
		case tar.TypeReg:
			data := e.data
			if e.source != "" {
				var err error
				if data, err = os.ReadFile(e.source); err != nil {
					return fmt.Errorf("reading /%s: %w", name, err)
				}
			}
			hdr.Size = int64(len(data))
			body = bytes.NewReader(data)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing /%s: %w", name, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return fmt.Errorf("writing /%s: %w", name, err)
			}
		}
	}
	return tw.Close()
}

// tarMode returns the tar header mode of m: permission bits plus setuid, setgid and sticky.
func tarMode(m fs.FileMode) int64 {
	out := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		out |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		out |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		out |= 0o1000
	}
	return out
}
