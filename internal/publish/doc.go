// Package publish pushes a release to an OCI registry with go-containerregistry's remote
// writes: per component (portico-agent, portico-controller, portico-ccm) an image index with
// one image per platform (linux/amd64 and linux/arm64 by default; internal/images builds them,
// cross-compiling the binaries and taking the agent's Debian packages of each architecture),
// each platform image with an SPDX SBOM attached as an artifact that refers to it (its Go
// modules from the binaries' build information, its Debian packages with their versions),
// found by the referrers API or the referrers tag fallback (sha256-<digest>); and the Helm
// chart as an OCI artifact at <registry>/charts/portico, its version and appVersion set from
// the images' version (ChartVersions) without editing Chart.yaml. `make push` (e2e/tools/push)
// runs Push.
package publish
