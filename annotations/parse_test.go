package annotations

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}
func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// wantErr is one expected error: on key, with bad value bad, and a detail containing contains.
type wantErr struct {
	key      string
	bad      any
	contains string
}

type parseCase struct {
	name string
	in   map[string]string
	// want edits the spec of empty annotations into the expected spec; nil: unchanged.
	want func(s *Spec)
	errs []wantErr
}

var parseCases = []parseCase{{name: "nil map"},
	{name: "empty map", in: map[string]string{}},

	// portico-lb.io/internal
	{name: "internal true", in: map[string]string{Internal: "true"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal false", in: map[string]string{Internal: "false"}},
	{name: "internal surrounding whitespace", in: map[string]string{Internal: " true\n"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal yes is an error", in: map[string]string{Internal: "yes"}, errs: []wantErr{{Internal, "yes", `"true" or "false"`}}},
	{name: "internal True is an error", in: map[string]string{Internal: "True"}, errs: []wantErr{{Internal, "True", `"true" or "false"`}}},
	{name: "internal empty is an error", in: map[string]string{Internal: ""}, errs: []wantErr{{Internal, "", `"true" or "false"`}}},

	// load-balancer-source-ranges
	{name: "source ranges v4 and v6 with spaces", in: map[string]string{SourceRanges: "10.0.0.0/8, 2001:db8::/32 ,198.19.0.1/32"},
		want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8", "2001:db8::/32", "198.19.0.1/32") }},
	{name: "source range host bits are masked", in: map[string]string{SourceRanges: "10.1.2.3/8"},
		want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8") }},
	{name: "source ranges empty value", in: map[string]string{SourceRanges: ""}},
	{name: "source range bare IPv4", in: map[string]string{SourceRanges: "10.0.0.1"}, errs: []wantErr{{SourceRanges, "10.0.0.1", "10.0.0.1/32"}}},
	{name: "source range bare IPv6", in: map[string]string{SourceRanges: "2001:db8::1"}, errs: []wantErr{{SourceRanges, "2001:db8::1", "2001:db8::1/128"}}},
	{name: "source ranges every bad item reported", in: map[string]string{SourceRanges: "10.0.0.0/8,bogus,10.0.0.0/33"},
		errs: []wantErr{{SourceRanges, "bogus", "not a CIDR"}, {SourceRanges, "10.0.0.0/33", "not a CIDR"}}},
	{name: "source ranges empty item", in: map[string]string{SourceRanges: "10.0.0.0/8,,10.1.0.0/16"},
		errs: []wantErr{{SourceRanges, "10.0.0.0/8,,10.1.0.0/16", "empty item"}}},
	{name: "source ranges trailing comma", in: map[string]string{SourceRanges: "10.0.0.0/8,"},
		errs: []wantErr{{SourceRanges, "10.0.0.0/8,", "empty item"}}},
	{name: "source ranges duplicate after masking", in: map[string]string{SourceRanges: "10.0.0.0/8, 10.9.9.9/8"},
		errs: []wantErr{{SourceRanges, "10.9.9.9/8", "duplicate CIDR"}}},

	// portico-lb.io/loadBalancerIPs and aliases
	{name: "lb IPs dual stack", in: map[string]string{LoadBalancerIPs: "198.18.128.10, 2001:db8::10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{name: "lb IPs empty value", in: map[string]string{LoadBalancerIPs: ""}},
	{name: "lb IPs CIDR is not an address", in: map[string]string{LoadBalancerIPs: "198.18.128.0/24"},
		errs: []wantErr{{LoadBalancerIPs, "198.18.128.0/24", "a CIDR is not an address"}}},
	{name: "lb IPs garbage", in: map[string]string{LoadBalancerIPs: "198.18.128.10,nope"},
		errs: []wantErr{{LoadBalancerIPs, "nope", "not an IP address"}}},
	{name: "lb IPs zone", in: map[string]string{LoadBalancerIPs: "fe80::1%eth0"},
		errs: []wantErr{{LoadBalancerIPs, "fe80::1%eth0", "zone"}}},
	{name: "lb IPs v4-mapped", in: map[string]string{LoadBalancerIPs: "::ffff:198.18.128.1"},
		errs: []wantErr{{LoadBalancerIPs, "::ffff:198.18.128.1", "write 198.18.128.1"}}},
	{name: "lb IPs MetalLB alias", in: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") }},
	{name: "lb IPs legacy MetalLB alias", in: map[string]string{MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.11") }},
	{name: "lb IPs kube-vip alias", in: map[string]string{KubeVIPLoadBalancerIPs: "198.18.128.12"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.12") }},
	{name: "lb IPs key and aliases agree", in: map[string]string{
		LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "198.18.128.10, 2001:db8::10", KubeVIPLoadBalancerIPs: " 198.18.128.10 ,2001:db8:0::10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{name: "lb IPs alias conflicts", in: map[string]string{LoadBalancerIPs: "198.18.128.10", KubeVIPLoadBalancerIPs: "198.18.128.99"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{KubeVIPLoadBalancerIPs, "198.18.128.99", "conflicts with portico-lb.io/loadBalancerIPs"}}},
	{name: "lb IPs aliases conflict with each other", in: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10", MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{MetalLBLegacyLoadBalancerIPs, "198.18.128.11", "conflicts with metallb.io/loadBalancerIPs"}}},
	{name: "lb IPs order matters", in: map[string]string{LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "2001:db8::10,198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") },
		errs: []wantErr{{MetalLBLoadBalancerIPs, "2001:db8::10,198.18.128.10", "conflicts with"}}},
	{name: "lb IPs invalid key, valid alias is used", in: map[string]string{LoadBalancerIPs: "bad", MetalLBLoadBalancerIPs: "198.18.128.10"},
		want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		errs: []wantErr{{LoadBalancerIPs, "bad", "not an IP address"}}},

	// aws-load-balancer-internal
	{name: "aws internal true", in: map[string]string{AWSLoadBalancerInternal: "true"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal CIDR means internal", in: map[string]string{AWSLoadBalancerInternal: "0.0.0.0/0"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal yes means internal", in: map[string]string{AWSLoadBalancerInternal: "yes"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal False means internal", in: map[string]string{AWSLoadBalancerInternal: "False"}, want: func(s *Spec) { s.Internal = true }},
	{name: "aws internal false", in: map[string]string{AWSLoadBalancerInternal: "false"}},
	{name: "aws internal empty", in: map[string]string{AWSLoadBalancerInternal: ""}},
	{name: "internal keys agree", in: map[string]string{Internal: "true", AWSLoadBalancerInternal: "yes"}, want: func(s *Spec) { s.Internal = true }},
	{name: "internal keys agree on false", in: map[string]string{Internal: "false", AWSLoadBalancerInternal: ""}},
	{name: "internal keys disagree", in: map[string]string{Internal: "true", AWSLoadBalancerInternal: "false"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{AWSLoadBalancerInternal, "false", "conflicts with portico-lb.io/internal"}}},
	{name: "internal keys disagree the other way", in: map[string]string{Internal: "false", AWSLoadBalancerInternal: "0.0.0.0/0"},
		errs: []wantErr{{AWSLoadBalancerInternal, "0.0.0.0/0", "conflicts with portico-lb.io/internal"}}},
	{name: "invalid portico internal does not conflict", in: map[string]string{Internal: "yes", AWSLoadBalancerInternal: "true"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{Internal, "yes", `"true" or "false"`}}},
	{name: "tags empty value", in: map[string]string{AWSAdditionalResourceTags: ""}},

	// unknown and foreign keys
	{name: "portico typo", in: map[string]string{"portico-lb.io/interal": "true"},
		errs: []wantErr{{"portico-lb.io/interal", "true", `did you mean "portico-lb.io/internal"`}}},
	{name: "portico kube-vip casing", in: map[string]string{"portico-lb.io/loadbalancerIPs": "198.18.128.1"},
		errs: []wantErr{{"portico-lb.io/loadbalancerIPs", "198.18.128.1", `did you mean "portico-lb.io/loadBalancerIPs"`}}},
	{name: "portico unknown far from everything", in: map[string]string{"portico-lb.io/something-else": "x"},
		errs: []wantErr{{"portico-lb.io/something-else", "x", "unknown portico-lb.io/ annotation; known keys: portico-lb.io/internal"}}},
	{name: "foreign keys are ignored", in: map[string]string{
		"metallb.io/ip-allocated-from-pool": "x", "kube-vip.io/vipHost": "n1", "example.com/whatever": "y",
		"service.beta.kubernetes.io/aws-load-balancer-name": "x", "portico-lb.iox/internal": "nope"}},

	// aws-load-balancer-scheme
	{name: "scheme internal", in: map[string]string{AWSLoadBalancerScheme: "internal"}, want: func(s *Spec) { s.Internal = true }},
	{name: "scheme internet-facing agrees with internal false", in: map[string]string{AWSLoadBalancerScheme: "internet-facing", Internal: "false"}},
	{name: "scheme conflicts with the AWS internal key", in: map[string]string{AWSLoadBalancerScheme: "internet-facing", AWSLoadBalancerInternal: "true"},
		want: func(s *Spec) { s.Internal = true },
		errs: []wantErr{{AWSLoadBalancerScheme, "internet-facing", "conflicts with service.beta.kubernetes.io/aws-load-balancer-internal"}}},
	{name: "scheme bad value", in: map[string]string{AWSLoadBalancerScheme: "Internal"}, errs: []wantErr{{AWSLoadBalancerScheme, "Internal", `"internal" or "internet-facing"`}}},
	{name: "lb IPs duplicate", in: map[string]string{LoadBalancerIPs: "2001:db8::10,2001:DB8:0::10"},
		errs: []wantErr{{LoadBalancerIPs, "2001:DB8:0::10", "duplicate address"}}},

	// several problems at once, sorted by key; providers' keys are theirs to judge
	{name: "every problem reported in key order", in: map[string]string{
		Internal: "yes", AWSLoadBalancerType: "external", AddressPool: "UPPER", "portico-lb.io/zzz": "1",
		AWSHealthCheckInterval: "1", SourceRanges: "10.0.0.1", AWSSubnets: "subnet-1"},
		errs: []wantErr{
			{Internal, "yes", `"true" or "false"`},
			{"portico-lb.io/zzz", "1", "unknown"},
			{SourceRanges, "10.0.0.1", "10.0.0.1/32"},
		}},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := Parse(tc.in)
			want, _ := Parse(nil)
			if tc.want != nil {
				tc.want(&want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("spec:\n got %+v\nwant %+v", got, want)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.errs), errs)
			}
			for i, e := range errs {
				w := tc.errs[i]
				wantField := field.NewPath("metadata", "annotations").Key(w.key).String()
				if e.Type != field.ErrorTypeInvalid || e.Field != wantField || !reflect.DeepEqual(e.BadValue, w.bad) || !strings.Contains(e.Detail, w.contains) {
					t.Errorf("error %d: got %v (type %s, field %s, value %#v)\nwant field %s, value %#v, detail containing %q",
						i, e, e.Type, e.Field, e.BadValue, wantField, w.bad, w.contains)
				}
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	got, errs := Parse(nil)
	if errs != nil {
		t.Fatalf("errors for no annotations: %v", errs)
	}
	if want := (Spec{}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestEveryKeyHasCases makes adding a key without tests fail: every key Parse reads needs a valid
// and an invalid case in parseCases, every alias a valid case. (Each provider's tests do the same
// for the keys its ParseOptions reads.)
func TestEveryKeyHasCases(t *testing.T) {
	valid, invalid := map[string]bool{}, map[string]bool{}
	for _, tc := range parseCases {
		bad := map[string]bool{}
		for _, e := range tc.errs {
			bad[e.key] = true
			invalid[e.key] = true
		}
		for k := range tc.in {
			if !bad[k] {
				valid[k] = true
			}
		}
	}
	for _, r := range commonRules {
		k, _ := lookup(r.Key)
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

func TestParseDoesNotModifyInput(t *testing.T) {
	in := map[string]string{Internal: " true ", SourceRanges: "10.0.0.1/8", "portico-lb.io/x": "y"}
	cp := map[string]string{}
	for k, v := range in {
		cp[k] = v
	}
	Parse(in)
	if !reflect.DeepEqual(in, cp) {
		t.Errorf("Parse modified its input: %v", in)
	}
}

// TestParseKeyAgreesWithParse: for every case, ParseKey of each key reports exactly the errors
// Parse reports for that key (and its aliases) and sets the same value, so a reader of one key
// (portico-agent's source ranges) accepts exactly what the controller accepts.
func TestParseKeyAgreesWithParse(t *testing.T) {
	for _, c := range parseCases {
		full, fullErrs := Parse(c.in)
		for _, r := range commonRules {
			k, _ := lookup(r.Key)
			got, errs := ParseKey(c.in, k.Name)
			var want []string
			for _, e := range fullErrs {
				for _, n := range k.names() {
					if e.Field == field.NewPath("metadata", "annotations").Key(n).String() {
						want = append(want, e.Error())
					}
				}
			}
			var have []string
			for _, e := range errs {
				have = append(have, e.Error())
			}
			// Cross-key conflicts (internal vs the AWS internal and scheme keys) are Parse's alone.
			if k.Name == AWSLoadBalancerInternal || k.Name == AWSLoadBalancerScheme {
				continue
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("%s: ParseKey(%s) errors %q, Parse reports %q", c.name, k.Name, have, want)
			}
			if k.Name == SourceRanges && len(errs) == 0 && !reflect.DeepEqual(got.SourceRanges, full.SourceRanges) {
				t.Errorf("%s: ParseKey source ranges %v, Parse %v", c.name, got.SourceRanges, full.SourceRanges)
			}
		}
	}
}

func TestParseKeyUnknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ParseKey of an unknown key did not panic")
		}
	}()
	ParseKey(nil, "portico-lb.io/nope")
}

func TestParseKeyOfAProviderKeyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ParseKey of a provider's key did not panic")
		}
	}()
	ParseKey(nil, AddressPool)
}

// TestCommonRulesCoverKeys: Parse reads every provider-neutral key of Keys, plus the AWS internal
// and scheme keys that set the common Internal, and nothing else.
func TestCommonRulesCoverKeys(t *testing.T) {
	var want []string
	for _, k := range Keys {
		if k.Provider == providerAny || k.Name == AWSLoadBalancerInternal || k.Name == AWSLoadBalancerScheme {
			want = append(want, k.Name)
		}
	}
	var got []string
	for _, r := range commonRules {
		got = append(got, r.Key)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("commonRules read %v, want %v", got, want)
	}
}

// TestParseSection: a section's rules get Parse's alias handling and strictness, and a rule for
// a key Keys does not declare panics.
func TestParseSection(t *testing.T) {
	type pool struct{ Name string }
	rules := []Rule[pool]{{Key: AddressPool, Parse: func(v string, p *pool) []Problem {
		if v == "" {
			return []Problem{{Bad: v, Detail: "empty"}}
		}
		p.Name = v
		return nil
	}}}
	got, errs := ParseSection(map[string]string{MetalLBAddressPool: "a", MetalLBLegacyAddressPool: "b", Internal: "yes"}, rules)
	if got.Name != "a" || len(errs) != 1 || errs[0].Field != "metadata.annotations["+MetalLBLegacyAddressPool+"]" || !strings.Contains(errs[0].Detail, "conflicts with") {
		t.Errorf("got %+v, %v", got, errs)
	}
	defer func() {
		if recover() == nil {
			t.Error("a rule for an undeclared key did not panic")
		}
	}()
	ParseSection(nil, []Rule[pool]{{Key: "portico-lb.io/nope", Parse: rules[0].Parse}})
}
