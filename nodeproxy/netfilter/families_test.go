package netfilter

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// TestFamiliesSync: every family is attempted and reported to FamilySynced; the error joins
// the failed ones'; the no-local-endpoints gauge is the families' sum, set only when all
// succeeded.
func TestFamiliesSync(t *testing.T) {
	type outcome struct {
		fam rules.Family
		err error
	}
	var seen []outcome
	m := NewFamilyMetrics()
	fs := NewFamilies([]rules.Family{rules.IPv6, rules.IPv4}, FamilyOptions{
		FamilySynced: func(f rules.Family, err error) { seen = append(seen, outcome{f, err}) },
	}, m)
	if got := fs.List(); len(got) != 2 || got[0] != rules.IPv4 || got[1] != rules.IPv6 {
		t.Fatalf("families %v, want IPv4 then IPv6", got)
	}
	counts := []NoLocal{{External: 1, Internal: 2}, {External: 3}}
	if err := fs.Sync(func(i int) (NoLocal, error) { return counts[i], nil }); err != nil {
		t.Fatal(err)
	}
	ext := m.noLocalEndpoints.WithLabelValues("external")
	in := m.noLocalEndpoints.WithLabelValues("internal")
	if e, i := testutil.ToFloat64(ext), testutil.ToFloat64(in); e != 4 || i != 2 {
		t.Fatalf("no-local gauge external=%v internal=%v, want 4 and 2", e, i)
	}

	seen = nil
	boom := errors.New("boom")
	err := fs.Sync(func(i int) (NoLocal, error) {
		if i == 0 {
			return NoLocal{}, boom
		}
		return NoLocal{External: 9}, nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want it to wrap the IPv4 family's", err)
	}
	if len(seen) != 2 || seen[0] != (outcome{rules.IPv4, boom}) || seen[1] != (outcome{rules.IPv6, nil}) {
		t.Fatalf("FamilySynced saw %v, want IPv4 failed and IPv6 attempted and synced", seen)
	}
	if e := testutil.ToFloat64(ext); e != 4 {
		t.Fatalf("no-local gauge changed to %v by a failed sync", e)
	}
}
