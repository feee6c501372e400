package publish

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

// DefaultPlatforms are the architectures (GOARCH) pushed when Options.Platforms is empty:
// prereq.ImagePlatforms, whose Debian architectures `make prereqs` makes apt know.
var DefaultPlatforms = prereq.ImagePlatforms

// Options say what to push where.
type Options struct {
	// Registry is host[:port][/prefix]: images go to <Registry>/<binary>:<Version>, the chart to
	// <Registry>/charts/portico:<chart version>.
	Registry string
	// Insecure talks plain HTTP to the registry (a lab registry); otherwise HTTPS, except
	// that go-containerregistry uses HTTP for localhost and 127.0.0.1 by itself.
	Insecure bool
	// Version is the images' tag and the chart's appVersion (ChartVersions).
	Version string
	// Platforms are the architectures (GOARCH) of every index; empty: DefaultPlatforms.
	Platforms []string
	// Only pushes just these images (images.Binaries); empty: all.
	Only []string
	// Chart is the chart's directory (deploy/chart/portico); empty: no chart is pushed.
	Chart string
	// Username and Password authenticate to the registry (images and chart); empty: the
	// credentials of `docker login` (images) and `helm registry login` (chart), else anonymous.
	Username, Password string
	// DebCache and Work are images.Options'.
	DebCache, Work string
	Log            func(string, ...any)
}

// Result says what was pushed.
type Result struct {
	Indexes []Index
	// Chart is the chart's reference (oci://<registry>/charts/portico) and ChartVersion its
	// version; empty when no chart was pushed.
	Chart, ChartVersion string
	ChartDigest         string
	// BuildTime and PushTime are the time spent building the images and writing to the registry.
	BuildTime, PushTime time.Duration
}

// Index is one component's image index.
type Index struct {
	Ref    string // <registry>/<binary>:<version>
	Digest v1.Hash
	Images []Platform
}

// Platform is one platform image of an index.
type Platform struct {
	Arch   string
	Digest v1.Hash
	// Size is what a node pulls: the manifest, config and compressed layers, in bytes.
	Size int64
	// SBOM is the digest of the SBOM artifact that refers to the image.
	SBOM v1.Hash
}

// Push builds the images for every platform, pushes one index per component with each platform
// image's SBOM, and pushes the chart.
func Push(ctx context.Context, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Registry == "" || o.Version == "" {
		return nil, fmt.Errorf("a registry and a version are needed")
	}
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
	}
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	registry := strings.TrimSuffix(o.Registry, "/")
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain) // docker login's credentials
	if o.Username != "" {
		auth = remote.WithAuth(&authn.Basic{Username: o.Username, Password: o.Password})
	}
	remoteOpts := []remote.Option{remote.WithContext(ctx), auth,
		remote.WithReferrersTagFallback(true), remote.WithJobs(runtime.GOMAXPROCS(0) * 2)}

	start := time.Now()
	byName := map[string][]images.Built{}
	var names []string
	for _, arch := range platforms {
		o.Log("building the images for linux/%s", arch)
		built, err := images.Images(ctx, images.Options{Repo: registry, Version: o.Version, Arch: arch, Only: o.Only,
			DebCache: o.DebCache, Work: o.Work, Log: o.Log})
		if err != nil {
			return nil, fmt.Errorf("building the images for linux/%s: %w", arch, err)
		}
		for _, b := range built {
			if _, ok := byName[b.Name]; !ok {
				names = append(names, b.Name)
			}
			byName[b.Name] = append(byName[b.Name], b)
		}
	}
	res := &Result{BuildTime: time.Since(start)}

	start = time.Now()
	for _, n := range names {
		ix, err := pushIndex(byName[n], o.Version, nameOpts, remoteOpts)
		if err != nil {
			return nil, fmt.Errorf("pushing %s: %w", n, err)
		}
		o.Log("pushed %s@%s", ix.Ref, ix.Digest)
		res.Indexes = append(res.Indexes, *ix)
	}
	if o.Chart != "" {
		ref, version, digest, err := pushChart(o.Chart, registry, o.Version, o.Insecure, o.Username, o.Password)
		if err != nil {
			return nil, fmt.Errorf("pushing the chart: %w", err)
		}
		o.Log("pushed the chart %s --version %s", ref, version)
		res.Chart, res.ChartVersion, res.ChartDigest = ref, version, digest
	}
	res.PushTime = time.Since(start)
	return res, nil
}

// pushIndex pushes the platform images of one component as an index tagged with their
// reference, then each image's SBOM referring to it.
func pushIndex(built []images.Built, version string, nameOpts []name.Option, remoteOpts []remote.Option) (*Index, error) {
	tag, err := name.NewTag(built[0].Ref, append(nameOpts, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", built[0].Ref, err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	ix := &Index{Ref: tag.String()}
	var sboms []v1.Image
	for _, b := range built {
		desc, err := partial.Descriptor(b.Image)
		if err != nil {
			return nil, err
		}
		desc.Platform = &v1.Platform{OS: "linux", Architecture: b.Arch}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: b.Image, Descriptor: v1.Descriptor{Platform: desc.Platform}})
		doc, err := SBOM(b, version, desc.Digest)
		if err != nil {
			return nil, err
		}
		sbom, err := sbomArtifact(doc, *desc)
		if err != nil {
			return nil, err
		}
		sd, err := sbom.Digest()
		if err != nil {
			return nil, err
		}
		size, err := pullSize(b.Image)
		if err != nil {
			return nil, err
		}
		ix.Images = append(ix.Images, Platform{Arch: b.Arch, Digest: desc.Digest, Size: size, SBOM: sd})
		sboms = append(sboms, sbom)
	}
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/portico-lb/portico",
	}).(v1.ImageIndex)
	if err := remote.WriteIndex(tag, idx, remoteOpts...); err != nil {
		return nil, err
	}
	if ix.Digest, err = idx.Digest(); err != nil {
		return nil, err
	}
	// The SBOMs after their subjects: a registry without the referrers API gets the fallback
	// tag sha256-<subject digest> listing them (remote.WithReferrersTagFallback).
	for _, s := range sboms {
		d, err := s.Digest()
		if err != nil {
			return nil, err
		}
		if err := remote.Write(tag.Context().Digest(d.String()), s, remoteOpts...); err != nil {
			return nil, fmt.Errorf("pushing the SBOM: %w", err)
		}
	}
	return ix, nil
}

// pullSize is what a node pulls of img: its manifest, config and compressed layers.
func pullSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
