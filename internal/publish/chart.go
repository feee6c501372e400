package publish

import (
	"fmt"
	"io"
	"os"
	"path"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// pushChart packages the chart in dir with its version and appVersion set from the images'
// version (ChartVersions; Chart.yaml is not edited) and pushes it to <registry>/charts/<name>
// with Helm's registry client. It returns the oci:// reference, the version and the digest.
func pushChart(dir, reg, version string, plainHTTP bool, username, password string) (ref, chartVersion, digest string, err error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", "", "", fmt.Errorf("loading %s: %w", dir, err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = ChartVersions(version)
	tmp, err := os.MkdirTemp("", "portico-chart-")
	if err != nil {
		return "", "", "", err
	}
	defer os.RemoveAll(tmp)
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return "", "", "", fmt.Errorf("packaging: %w", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", "", "", err
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard)} // Push reports what it pushed
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if username != "" {
		opts = append(opts, registry.ClientOptBasicAuth(username, password))
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return "", "", "", err
	}
	repo := path.Join(reg, "charts", ch.Metadata.Name)
	res, err := client.Push(data, repo+":"+ch.Metadata.Version)
	if err != nil {
		return "", "", "", err
	}
	return "oci://" + repo, ch.Metadata.Version, res.Manifest.Digest, nil
}
