package baremetal

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/annotations"
)

// wantErr is one expected error: on key, with bad value bad, and a detail containing contains.
type wantErr struct {
	key      string
	bad      any
	contains string
}

// checkErrs compares errs with want, in order.
func checkErrs(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, e := range errs {
		w := want[i]
		wantField := field.NewPath("metadata", "annotations").Key(w.key).String()
		if e.Type != field.ErrorTypeInvalid || e.Field != wantField || !reflect.DeepEqual(e.BadValue, w.bad) || !strings.Contains(e.Detail, w.contains) {
			t.Errorf("error %d: got %v (type %s, field %s, value %#v)\nwant field %s, value %#v, detail containing %q",
				i, e, e.Type, e.Field, e.BadValue, wantField, w.bad, w.contains)
		}
	}
}

// checkEveryKeyHasCases makes adding a key without tests fail: every canonical key of keys needs
// a valid and an invalid case, every alias a valid case.
func checkEveryKeyHasCases(t *testing.T, keys []string, cases []map[string]string, errs [][]wantErr) {
	valid, invalid := map[string]bool{}, map[string]bool{}
	for i, in := range cases {
		bad := map[string]bool{}
		for _, e := range errs[i] {
			bad[e.key] = true
			invalid[e.key] = true
		}
		for k := range in {
			if !bad[k] {
				valid[k] = true
			}
		}
	}
	for _, k := range annotations.Keys {
		if !slices.Contains(keys, k.Name) {
			continue
		}
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

type optionsCase struct {
	name string
	in   map[string]string
	// want edits the zero options into the expected ones; nil: unchanged.
	want func(o *ServiceOptions)
	errs []wantErr
}

var optionsCases = []optionsCase{
	// portico-lb.io/address-pool and aliases
	{name: "address pool", in: map[string]string{annotations.AddressPool: "default"}, want: func(o *ServiceOptions) { o.AddressPool = "default" }},
	{name: "address pool annotations.MetalLB alias", in: map[string]string{annotations.MetalLBAddressPool: "pool-a"}, want: func(o *ServiceOptions) { o.AddressPool = "pool-a" }},
	{name: "address pool legacy alias", in: map[string]string{annotations.MetalLBLegacyAddressPool: "pool-b"}, want: func(o *ServiceOptions) { o.AddressPool = "pool-b" }},
	{name: "address pool key and alias agree", in: map[string]string{annotations.AddressPool: "pool-a", annotations.MetalLBLegacyAddressPool: " pool-a"},
		want: func(o *ServiceOptions) { o.AddressPool = "pool-a" }},
	{name: "address pool conflict", in: map[string]string{annotations.AddressPool: "pool-a", annotations.MetalLBAddressPool: "pool-b"},
		want: func(o *ServiceOptions) { o.AddressPool = "pool-a" },
		errs: []wantErr{{annotations.MetalLBAddressPool, "pool-b", "conflicts with portico-lb.io/address-pool"}}},
	{name: "address pool bad name", in: map[string]string{annotations.AddressPool: "Pool_1"}, errs: []wantErr{{annotations.AddressPool, "Pool_1", "DNS-1123"}}},
	{name: "address pool empty", in: map[string]string{annotations.AddressPool: ""}, errs: []wantErr{{annotations.AddressPool, "", "DNS-1123"}}},

	// portico-lb.io/allow-shared-ip and aliases
	{name: "allow shared ip", in: map[string]string{annotations.AllowSharedIP: "web"}, want: func(o *ServiceOptions) { o.AllowSharedIP = "web" }},
	{name: "allow shared ip annotations.MetalLB alias", in: map[string]string{annotations.MetalLBAllowSharedIP: "dns"}, want: func(o *ServiceOptions) { o.AllowSharedIP = "dns" }},
	{name: "allow shared ip legacy alias", in: map[string]string{annotations.MetalLBLegacyAllowSharedIP: "dns"}, want: func(o *ServiceOptions) { o.AllowSharedIP = "dns" }},
	{name: "allow shared ip conflict", in: map[string]string{annotations.MetalLBAllowSharedIP: "a", annotations.MetalLBLegacyAllowSharedIP: "b"},
		want: func(o *ServiceOptions) { o.AllowSharedIP = "a" },
		errs: []wantErr{{annotations.MetalLBLegacyAllowSharedIP, "b", "conflicts with metallb.io/allow-shared-ip"}}},
	{name: "allow shared ip empty", in: map[string]string{annotations.AllowSharedIP: " "}, errs: []wantErr{{annotations.AllowSharedIP, "", "non-empty"}}},
}

func TestParseServiceOptions(t *testing.T) {
	for _, tc := range optionsCases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseServiceOptions(tc.in)
			var want ServiceOptions
			if tc.want != nil {
				tc.want(&want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("options:\n got %+v\nwant %+v", got, want)
			}
			checkErrs(t, errs, tc.errs)
		})
	}
}

// TestOptionRulesCoverKeys: the rules read exactly the baremetal keys annotations.Keys declares.
func TestOptionRulesCoverKeys(t *testing.T) {
	var declared, ruled []string
	for _, k := range annotations.Keys {
		if k.Provider == "baremetal" {
			declared = append(declared, k.Name)
		}
	}
	for _, r := range optionRules {
		ruled = append(ruled, r.Key)
	}
	if !slices.Equal(declared, ruled) {
		t.Errorf("rules read %v, annotations.Keys declares %v", ruled, declared)
	}
}

func TestEveryOptionKeyHasCases(t *testing.T) {
	var keys []string
	for _, r := range optionRules {
		keys = append(keys, r.Key)
	}
	var ins []map[string]string
	var errs [][]wantErr
	for _, tc := range optionsCases {
		ins, errs = append(ins, tc.in), append(errs, tc.errs)
	}
	checkEveryKeyHasCases(t, keys, ins, errs)
}
