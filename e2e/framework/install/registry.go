package install

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/internal/publish"
)

// push pushes the images of tag the release runs, for this machine's architecture, and the
// chart in chartDir (empty: none) to opts.Registry over plain HTTP with internal/publish, what
// `make push` runs. It returns the chart's oci:// reference and version.
func push(ctx context.Context, opts Options, tag, chartDir string) (ref, version string, err error) {
	work, err := os.MkdirTemp("", "portico-install-push-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(work)
	res, err := publish.Push(ctx, publish.Options{
		Registry: opts.Registry, Insecure: true, Version: tag, Platforms: []string{runtime.GOARCH},
		Only: usedImages(opts), Chart: chartDir,
		DebCache: filepath.Join(prereq.CacheDir(), "debs"), Work: work, Log: opts.Logf,
	})
	if err != nil {
		return "", "", fmt.Errorf("pushing to %s: %w", opts.Registry, err)
	}
	return res.Chart, res.ChartVersion, nil
}

// PullChart pulls the chart at ref (oci://host:port/.../portico, plain HTTP) and version
// with Helm's registry client, as `helm install oci://... --version` does.
func PullChart(ref, version string) (*chart.Chart, error) {
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return nil, err
	}
	res, err := client.Pull(strings.TrimPrefix(ref, "oci://") + ":" + version)
	if err != nil {
		return nil, fmt.Errorf("pulling the chart %s --version %s: %w", ref, version, err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s --version %s: %w", ref, version, err)
	}
	return ch, nil
}
