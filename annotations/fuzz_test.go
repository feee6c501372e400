package annotations

import (
	"strings"
	"testing"
)

// allNames lists every key of Keys, aliases included: Parse must cope with the keys it does
// not read too.
func allNames() []string {
	var names []string
	for _, k := range Keys {
		names = append(names, k.names()...)
	}
	return names
}

func FuzzParse(f *testing.F) { parseTable.Fuzz(f, allNames(), render) }

// render writes a spec back as canonical annotations (the inverse of Parse, for tests).
func render(s Spec) map[string]string {
	m := map[string]string{}
	set := func(k, v string, ok bool) {
		if ok {
			m[k] = v
		}
	}
	join := func(items []string) string { return strings.Join(items, ",") }
	var ranges, ips []string
	for _, p := range s.SourceRanges {
		ranges = append(ranges, p.String())
	}
	for _, a := range s.RequestedIPs {
		ips = append(ips, a.String())
	}
	set(Internal, "true", s.Internal)
	set(SourceRanges, join(ranges), len(ranges) > 0)
	set(LoadBalancerIPs, join(ips), len(ips) > 0)
	return m
}

// TestRenderRoundTrip checks the test helper itself on every clean table case.
func TestRenderRoundTrip(t *testing.T) { parseTable.CheckRoundTrip(t, render) }
