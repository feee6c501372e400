package publish

import (
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestChartVersions(t *testing.T) {
	for _, tc := range []struct{ in, version string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3-rc.1"},
		{"v0.1.0-3-g9824d1b", "0.1.0-3-g9824d1b"},
		{"v0.1.0-3-g9824d1b-dirty", "0.1.0-3-g9824d1b-dirty"},
		{"9824d1b", "0.0.0-g9824d1b"},
		{"9824d1b-dirty", "0.0.0-g9824d1b-dirty"},
		{"abcdef0", "0.0.0-gabcdef0"},
		{"0123456", "0.0.0-g0123456"},
		{"devel", "0.0.0-gdevel"},
	} {
		v, app := ChartVersions(tc.in)
		if v != tc.version || app != tc.in {
			t.Errorf("ChartVersions(%q) = %q, %q; want %q, %q", tc.in, v, app, tc.version, tc.in)
		}
		if _, err := semver.StrictNewVersion(v); err != nil {
			t.Errorf("ChartVersions(%q) = %q, not SemVer: %v", tc.in, v, err)
		}
	}
}
