package annotations

import (
	"reflect"
	"slices"
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

func FuzzParse(f *testing.F) {
	names := allNames()
	for _, tc := range parseCases {
		keys := make([]string, 0, len(tc.in))
		for k := range tc.in {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch len(keys) {
		case 0:
			f.Add("", "", uint8(255), "")
		case 1:
			f.Add(keys[0], tc.in[keys[0]], uint8(255), "")
		default:
			f.Add(keys[0], tc.in[keys[0]], uint8(slices.Index(names, keys[1])), tc.in[keys[1]])
		}
	}
	f.Fuzz(func(t *testing.T, k1, v1 string, i2 uint8, v2 string) {
		in := map[string]string{}
		if int(i2) < len(names) {
			in[names[i2]] = v2
		}
		in[k1] = v1

		spec, errs := Parse(in)
		again, errs2 := Parse(in)
		if !reflect.DeepEqual(spec, again) || errs.ToAggregate() != nil && errs.ToAggregate().Error() != errs2.ToAggregate().Error() {
			t.Fatalf("Parse is not deterministic for %q", in)
		}
		prev := ""
		for _, e := range errs {
			key, ok := strings.CutPrefix(e.Field, "metadata.annotations[")
			key, ok2 := strings.CutSuffix(key, "]")
			if _, present := in[key]; !ok || !ok2 || !present || e.Detail == "" {
				t.Fatalf("malformed error %v for %q", e, in)
			}
			if key < prev {
				t.Fatalf("errors not sorted by key: %v", errs)
			}
			prev = key
		}
		if errs != nil {
			return
		}
		// A clean result is stable: writing it back as canonical annotations parses to the same spec.
		canonical := render(spec)
		back, errs := Parse(canonical)
		if errs != nil {
			t.Fatalf("re-parsing %q (from %q) failed: %v", canonical, in, errs)
		}
		if !reflect.DeepEqual(back, spec) {
			t.Fatalf("re-parse of %q changed the spec:\n got %+v\nwant %+v", canonical, back, spec)
		}
	})
}

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
func TestRenderRoundTrip(t *testing.T) {
	for _, tc := range parseCases {
		spec, errs := Parse(tc.in)
		if errs != nil {
			continue
		}
		back, errs := Parse(render(spec))
		if errs != nil || !reflect.DeepEqual(back, spec) {
			t.Errorf("%s: round trip gave %+v, %v; want %+v", tc.name, back, errs, spec)
		}
	}
}
