package publish

import "testing"

func TestChartVersions(t *testing.T) {
	for _, tc := range []struct{ in, version string }{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "1.2.3-rc.1"},
		{"v0.1.0-3-g9824d1b", "0.1.0-3-g9824d1b"},
		{"v0.1.0-3-g9824d1b-dirty", "0.1.0-3-g9824d1b-dirty"},
		{"9824d1b", "0.0.0-9824d1b"},
		{"9824d1b-dirty", "0.0.0-9824d1b-dirty"},
		{"devel", "0.0.0-devel"},
	} {
		v, app := ChartVersions(tc.in)
		if v != tc.version || app != tc.in {
			t.Errorf("ChartVersions(%q) = %q, %q; want %q, %q", tc.in, v, app, tc.version, tc.in)
		}
	}
}
