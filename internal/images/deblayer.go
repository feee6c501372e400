package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/portico-lb/portico/internal/ociimage"
)

// DebLayerOptions say where DebLayer keeps and unpacks the Debian packages.
type DebLayerOptions struct {
	// DebCache keeps downloaded Debian packages across runs.
	DebCache string
	// Work is where the packages are unpacked (removed by the caller).
	Work string
	Log  func(string, ...any)
}

// DebLayer returns a layer holding the files paths (absolute image paths) taken from the
// Debian packages pkgs (downloaded at the versions the mirror serves for this machine's
// architecture and unpacked, as the agent image's are), each with what its symbolic links point to and the loader and libraries its
// ELF files need, plus the symbolic links links (image path -> target). It returns the
// packages the layer's files come from, with their versions. Other images of upstream
// programs (e2e/framework/conformance: kube-proxy, agnhost) are built with it.
func DebLayer(ctx context.Context, o DebLayerOptions, pkgs, paths []string, links map[string]string) (*ociimage.Layer, map[string]string, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	debs, err := newDebRoot(o.DebCache, filepath.Join(o.Work, "debs"), "", o.Log)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pkgs {
		if err := debs.add(ctx, p); err != nil {
			return nil, nil, err
		}
	}
	f := &files{root: debs, regular: map[string]string{}, links: map[string]string{}}
	for _, p := range slices.Sorted(slices.Values(paths)) {
		if err := f.take(ctx, p); err != nil {
			return nil, nil, err
		}
	}
	l, err := f.layer()
	if err != nil {
		return nil, nil, err
	}
	for p, target := range links {
		if _, ok := f.regular[p]; ok {
			return nil, nil, fmt.Errorf("link %s would replace a file of the packages", p)
		}
		if err := l.AddSymlink(p, target); err != nil {
			return nil, nil, err
		}
	}
	return l, f.packages(debs), nil
}

// DebFiles lists the paths of package pkg's files (in its unpacked tree) matching the glob
// pattern (an absolute image path pattern, e.g. /usr/lib/x86_64-linux-gnu/xtables/*.so),
// downloading pkg at the version the mirror serves into o.DebCache and unpacking it in o.Work.
func DebFiles(ctx context.Context, o DebLayerOptions, pkg, pattern string) ([]string, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	debs, err := newDebRoot(o.DebCache, filepath.Join(o.Work, "debs"), "", o.Log)
	if err != nil {
		return nil, err
	}
	if err := debs.add(ctx, pkg); err != nil {
		return nil, err
	}
	root := filepath.Join(debs.dir, pkg)
	matches, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range matches {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			return nil, err
		}
		out = append(out, "/"+filepath.ToSlash(rel))
	}
	slices.Sort(out)
	return out, nil
}

// Multiarch is Debian's multiarch directory of this machine's architecture
// (x86_64-linux-gnu), where its libraries and the xtables extensions live.
func Multiarch() string { return multiarch }

// DebHostPath returns where the file p (an absolute image path) of package pkg lies on this
// machine once pkg is downloaded at the version the mirror serves and unpacked in o.Work: for
// running a program of the image's packages at build time (busybox --list).
func DebHostPath(ctx context.Context, o DebLayerOptions, pkg, p string) (string, error) {
	debs, err := newDebRoot(o.DebCache, filepath.Join(o.Work, "debs"), "", o.Log)
	if err != nil {
		return "", err
	}
	if err := debs.add(ctx, pkg); err != nil {
		return "", err
	}
	host := filepath.Join(debs.dir, pkg, p)
	if _, err := os.Lstat(host); err != nil {
		return "", fmt.Errorf("package %s has no %s: %w", pkg, p, err)
	}
	return host, nil
}
