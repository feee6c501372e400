// Package annotationstest holds the tests every annotation parser shares: package annotations'
// Parse and each provider's ParseServiceOptions (providers/aws, providers/baremetal) run their
// table of cases through one Table, with one error check, one check that every key has cases and
// one fuzz target. It imports no Portico package, so package annotations' own tests can use it;
// only tests import it.
package annotationstest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WantErr is one expected error: on Key, with bad value Bad, and a detail containing Contains.
type WantErr struct {
	Key      string
	Bad      any
	Contains string
}

// Case is one table case: annotations In parse to the value Want makes of the table's base and
// to the errors Errs, in order.
type Case[T any] struct {
	Name string
	In   map[string]string
	// Want edits the base value into the expected one; nil: unchanged.
	Want func(*T)
	Errs []WantErr
}

// Key is a declared annotation key and its aliases.
type Key struct {
	Name    string
	Aliases []string
}

// Table is a parser and its cases.
type Table[T any] struct {
	Parse func(map[string]string) (T, field.ErrorList)
	// Base returns the value a case's Want edits; nil: T's zero value.
	Base  func() T
	Cases []Case[T]
}

// Run runs every case as a subtest: the parsed value and the errors must be the case's.
func (tb Table[T]) Run(t *testing.T) {
	for _, tc := range tb.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, errs := tb.Parse(tc.In)
			var want T
			if tb.Base != nil {
				want = tb.Base()
			}
			if tc.Want != nil {
				tc.Want(&want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parsed:\n got %+v\nwant %+v", got, want)
			}
			CheckErrs(t, errs, tc.Errs)
		})
	}
}

// CheckErrs compares errs with want, in order: each a field.Invalid at
// metadata.annotations[<key>] with the bad value and a detail containing the wanted text.
func CheckErrs(t testing.TB, errs field.ErrorList, want []WantErr) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, e := range errs {
		w := want[i]
		wantField := field.NewPath("metadata", "annotations").Key(w.Key).String()
		if e.Type != field.ErrorTypeInvalid || e.Field != wantField || !reflect.DeepEqual(e.BadValue, w.Bad) || !strings.Contains(e.Detail, w.Contains) {
			t.Errorf("error %d: got %v (type %s, field %s, value %#v)\nwant field %s, value %#v, detail containing %q",
				i, e, e.Type, e.Field, e.BadValue, wantField, w.Bad, w.Contains)
		}
	}
}

// CheckKeys checks a parser's keys: its rules read exactly the declared keys, in order, and
// every declared key has a valid and an invalid case, every alias a valid case (so adding a key
// without tests fails).
func (tb Table[T]) CheckKeys(t testing.TB, read []string, declared []Key) {
	t.Helper()
	var names []string
	for _, k := range declared {
		names = append(names, k.Name)
	}
	if !slices.Equal(read, names) {
		t.Errorf("rules read %v, annotations.Keys declares %v", read, names)
	}
	valid, invalid := map[string]bool{}, map[string]bool{}
	for _, tc := range tb.Cases {
		bad := map[string]bool{}
		for _, e := range tc.Errs {
			bad[e.Key] = true
			invalid[e.Key] = true
		}
		for k := range tc.In {
			if !bad[k] {
				valid[k] = true
			}
		}
	}
	for _, k := range declared {
		if !valid[k.Name] || !invalid[k.Name] {
			t.Errorf("%s: need a valid and an invalid case (valid %t, invalid %t)", k.Name, valid[k.Name], invalid[k.Name])
		}
		for _, a := range k.Aliases {
			if !valid[a] {
				t.Errorf("%s: alias of %s needs a valid case", a, k.Name)
			}
		}
	}
}

// CheckRoundTrip checks render, the test's inverse of Parse, on every clean case: its output
// parses back to the same value.
func (tb Table[T]) CheckRoundTrip(t *testing.T, render func(T) map[string]string) {
	for _, tc := range tb.Cases {
		spec, errs := tb.Parse(tc.In)
		if errs != nil {
			continue
		}
		back, errs := tb.Parse(render(spec))
		if errs != nil || !reflect.DeepEqual(back, spec) {
			t.Errorf("%s: round trip gave %+v, %v; want %+v", tc.Name, back, errs, spec)
		}
	}
}

// Fuzz is the fuzz target of a parser: one annotation of any key and value plus one of the keys
// names (every declared key and alias: the parser must cope with the keys it does not read
// too), seeded from the cases. Parse must be deterministic, report each error as a non-empty
// detail at metadata.annotations[<a key of the input>] sorted by key, and a clean result must be
// stable: render writes it back as canonical annotations, which parse to the same value.
func (tb Table[T]) Fuzz(f *testing.F, names []string, render func(T) map[string]string) {
	for _, tc := range tb.Cases {
		keys := make([]string, 0, len(tc.In))
		for k := range tc.In {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch len(keys) {
		case 0:
			f.Add("", "", uint8(255), "")
		case 1:
			f.Add(keys[0], tc.In[keys[0]], uint8(255), "")
		default:
			f.Add(keys[0], tc.In[keys[0]], uint8(slices.Index(names, keys[1])), tc.In[keys[1]])
		}
	}
	f.Fuzz(func(t *testing.T, k1, v1 string, i2 uint8, v2 string) {
		in := map[string]string{}
		if int(i2) < len(names) {
			in[names[i2]] = v2
		}
		in[k1] = v1

		spec, errs := tb.Parse(in)
		again, errs2 := tb.Parse(in)
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
		// A clean result is stable: writing it back as canonical annotations parses to the same value.
		canonical := render(spec)
		back, errs := tb.Parse(canonical)
		if errs != nil {
			t.Fatalf("re-parsing %q (from %q) failed: %v", canonical, in, errs)
		}
		if !reflect.DeepEqual(back, spec) {
			t.Fatalf("re-parse of %q changed the spec:\n got %+v\nwant %+v", canonical, back, spec)
		}
	})
}
