package publish

import (
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ChartVersions returns the chart's version and appVersion for the images' version (what
// `git describe --tags --always --dirty` gives). The appVersion is the images' tag itself, so
// that the chart's default image tag (its appVersion) names the images pushed with it. The
// version is SemVer, as Helm requires: a tag vX.Y.Z gives X.Y.Z; a build after it
// (vX.Y.Z-3-gabcdef0, -dirty) the prerelease X.Y.Z-3-gabcdef0; a build with no tag in its
// history (abcdef0[-dirty]) 0.0.0-gabcdef0[-dirty].
func ChartVersions(version string) (chartVersion, appVersion string) {
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err == nil {
		return v.String(), version
	}
	// g<commit>, as git describe writes a commit after a tag (and a SemVer identifier of
	// digits only may not start with 0).
	return "0.0.0-g" + strings.Trim(notIdentifier.ReplaceAllString(version, "-"), "-"), version
}

// notIdentifier matches what a SemVer prerelease identifier may not hold.
var notIdentifier = regexp.MustCompile(`[^0-9A-Za-z-]+`)
