package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/portico-lb/portico/e2e/framework/cacheprune"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

// Repo prefixes the images this package builds: Repo/portico-agent:TAG and so on. Nothing
// resolves it, so a pull can never succeed by accident.
const Repo = "portico.invalid/portico-lb"

// Images are Portico's three image archives of one tag.
type Images struct {
	// Tag is the images' tag and the version the binaries print with --version.
	Tag string
	// Archives maps each binary (portico-agent, portico-controller, portico-ccm) to its
	// archive on disk.
	Archives map[string]string
}

var (
	imagesMu   sync.Mutex
	imagesDone = map[string]Images{} // by tag, in this process
	sourceKey  string
)

// SourceKey is a hash of everything the images are built from: the three binaries' sources
// and internal/images with internal/ociimage (gobuild.Key of each; the Debian packages
// are those the mirror served at the first build, named in the images' package label). It is computed once per process.
func SourceKey(ctx context.Context) (string, error) {
	imagesMu.Lock()
	defer imagesMu.Unlock()
	return sourceKeyLocked(ctx)
}

func sourceKeyLocked(ctx context.Context) (string, error) {
	if sourceKey != "" {
		return sourceKey, nil
	}
	h := sha256.New()
	fmt.Fprintln(h, "layers stored uncompressed") // how build calls images.Build
	for _, pkg := range []string{"cmd/portico-agent", "cmd/portico-controller", "cmd/portico-ccm", "e2e/tools/images"} {
		k, err := gobuild.Key(ctx, pkg)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, pkg, k)
	}
	sourceKey = hex.EncodeToString(h.Sum(nil))[:16]
	return sourceKey, nil
}

// DefaultTag is the tag Portico uses when Options.Tag is empty: e2e-<SourceKey>.
func DefaultTag(ctx context.Context) (string, error) {
	k, err := SourceKey(ctx)
	if err != nil {
		return "", err
	}
	return "e2e-" + k, nil
}

// BuildImages builds the three images tagged tag (internal/images, layers stored
// uncompressed: they only travel to the nodes' containerds), or finds them: built
// images are kept in the cache (internal/prereq.CacheDir()/install-images/<source key>-<tag>)
// and remembered in this process, so a second call with the same sources and tag costs
// nothing. Images of older sources go when unused for a while (e2e/framework/cacheprune).
func BuildImages(ctx context.Context, tag string, logf func(string, ...any)) (Images, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	imagesMu.Lock()
	defer imagesMu.Unlock()
	key, err := sourceKeyLocked(ctx)
	if err != nil {
		return Images{}, err
	}
	if im, ok := imagesDone[key+"-"+tag]; ok {
		return im, nil
	}
	dir := filepath.Join(prereq.CacheDir(), "install-images", key+"-"+tag)
	im := Images{Tag: tag, Archives: map[string]string{}}
	for _, b := range images.Binaries {
		im.Archives[b] = filepath.Join(dir, b+".tar")
	}
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		if err := build(ctx, dir, tag, logf); err != nil {
			return Images{}, err
		}
		cacheprune.Prune(filepath.Dir(dir), "")
	} else {
		cacheprune.Touch(dir)
	}
	imagesDone[key+"-"+tag] = im
	return im, nil
}

// build builds into a temporary sibling of dir and renames it into place, so that a killed
// build leaves no half-written images under dir's name.
func build(ctx context.Context, dir, tag string, logf func(string, ...any)) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	work, err := os.MkdirTemp("", "portico-install-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(tmp, "out")
	res, err := images.Build(ctx, images.Options{
		Repo: Repo, Version: tag, Out: out, Work: work,
		DebCache: filepath.Join(prereq.CacheDir(), "debs"), Log: logf, Stored: true,
	})
	if err != nil {
		return fmt.Errorf("building images %s: %w", tag, err)
	}
	for _, r := range res {
		logf("install: built %s (%.1f MB)", r.Ref, float64(r.Size)/1e6)
	}
	if err := os.WriteFile(filepath.Join(out, "done"), nil, 0o644); err != nil {
		return err
	}
	if err := os.Rename(out, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "done")); statErr == nil {
			return nil // another process built the same images meanwhile
		}
		return fmt.Errorf("storing images: %w", err)
	}
	return nil
}

// Ref is the image name of binary at tag.
func Ref(binary, tag string) string { return Repo + "/" + binary + ":" + tag }

// Import loads the images of binaries (none: all three) into every node's containerd
// (nodes.Node.ImportImage), the nodes in parallel.
func Import(ctx context.Context, c *nodes.Cluster, im Images, binaries ...string) error {
	if len(binaries) == 0 {
		binaries = images.Binaries
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() {
			for _, b := range binaries {
				if err := n.ImportImage(ctx, im.Archives[b]); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
