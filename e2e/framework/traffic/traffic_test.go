package traffic

import (
	"testing"
	"time"
)

// TestSummarize: the longest failure window runs from the first failure of a run to the next
// success's start; a trailing run ends at its last attempt's end; successes give the slowest.
func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a := func(start, end int, ok bool) attempt { return attempt{start: at(start), end: at(end), ok: ok} }
	for name, tc := range map[string]struct {
		in              []attempt
		failed          int
		longest, slow   time.Duration
		longestStartsAt time.Time
	}{
		"none":        {nil, 0, 0, 0, time.Time{}},
		"all served":  {[]attempt{a(0, 5, true), a(25, 1025, true)}, 0, 0, time.Second, time.Time{}},
		"one run":     {[]attempt{a(0, 5, true), a(25, 30, false), a(50, 55, false), a(75, 80, true)}, 2, 50 * time.Millisecond, 5 * time.Millisecond, at(25)},
		"two runs":    {[]attempt{a(0, 3000, false), a(3020, 3025, true), a(3045, 3050, false), a(3070, 3071, true)}, 2, 3020 * time.Millisecond, 5 * time.Millisecond, at(0)},
		"ends failed": {[]attempt{a(0, 1, true), a(21, 40, false), a(60, 90, false)}, 2, 69 * time.Millisecond, time.Millisecond, at(21)},
	} {
		failed, longest, start, slow := summarize(tc.in)
		if failed != tc.failed || longest != tc.longest || !start.Equal(tc.longestStartsAt) || slow != tc.slow {
			t.Errorf("%s: got failed %d, longest %s at %s, slowest %s; want %d, %s at %s, %s",
				name, failed, longest, start, slow, tc.failed, tc.longest, tc.longestStartsAt, tc.slow)
		}
	}
}
