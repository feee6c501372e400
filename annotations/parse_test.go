package annotations

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/portico-lb/portico/annotations/annotationstest"
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

type (
	wantErr   = annotationstest.WantErr
	parseCase = annotationstest.Case[Spec]
)

var parseCases = []parseCase{{Name: "nil map"},
	{Name: "empty map", In: map[string]string{}},

	// portico-lb.io/internal
	{Name: "internal true", In: map[string]string{Internal: "true"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "internal false", In: map[string]string{Internal: "false"}},
	{Name: "internal surrounding whitespace", In: map[string]string{Internal: " true\n"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "internal yes is an error", In: map[string]string{Internal: "yes"}, Errs: []wantErr{{Key: Internal, Bad: "yes", Contains: `"true" or "false"`}}},
	{Name: "internal True is an error", In: map[string]string{Internal: "True"}, Errs: []wantErr{{Key: Internal, Bad: "True", Contains: `"true" or "false"`}}},
	{Name: "internal empty is an error", In: map[string]string{Internal: ""}, Errs: []wantErr{{Key: Internal, Bad: "", Contains: `"true" or "false"`}}},

	// load-balancer-source-ranges
	{Name: "source ranges v4 and v6 with spaces", In: map[string]string{SourceRanges: "10.0.0.0/8, 2001:db8::/32 ,198.19.0.1/32"},
		Want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8", "2001:db8::/32", "198.19.0.1/32") }},
	{Name: "source range host bits are masked", In: map[string]string{SourceRanges: "10.1.2.3/8"},
		Want: func(s *Spec) { s.SourceRanges = prefixes("10.0.0.0/8") }},
	{Name: "source ranges empty value", In: map[string]string{SourceRanges: ""}},
	{Name: "source range bare IPv4", In: map[string]string{SourceRanges: "10.0.0.1"}, Errs: []wantErr{{Key: SourceRanges, Bad: "10.0.0.1", Contains: "10.0.0.1/32"}}},
	{Name: "source range bare IPv6", In: map[string]string{SourceRanges: "2001:db8::1"}, Errs: []wantErr{{Key: SourceRanges, Bad: "2001:db8::1", Contains: "2001:db8::1/128"}}},
	{Name: "source ranges every bad item reported", In: map[string]string{SourceRanges: "10.0.0.0/8,bogus,10.0.0.0/33"},
		Errs: []wantErr{{Key: SourceRanges, Bad: "bogus", Contains: "not a CIDR"}, {Key: SourceRanges, Bad: "10.0.0.0/33", Contains: "not a CIDR"}}},
	{Name: "source ranges empty item", In: map[string]string{SourceRanges: "10.0.0.0/8,,10.1.0.0/16"},
		Errs: []wantErr{{Key: SourceRanges, Bad: "10.0.0.0/8,,10.1.0.0/16", Contains: "empty item"}}},
	{Name: "source ranges trailing comma", In: map[string]string{SourceRanges: "10.0.0.0/8,"},
		Errs: []wantErr{{Key: SourceRanges, Bad: "10.0.0.0/8,", Contains: "empty item"}}},
	{Name: "source ranges duplicate after masking", In: map[string]string{SourceRanges: "10.0.0.0/8, 10.9.9.9/8"},
		Errs: []wantErr{{Key: SourceRanges, Bad: "10.9.9.9/8", Contains: "duplicate CIDR"}}},

	// portico-lb.io/loadBalancerIPs and aliases
	{Name: "lb IPs dual stack", In: map[string]string{LoadBalancerIPs: "198.18.128.10, 2001:db8::10"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{Name: "lb IPs empty value", In: map[string]string{LoadBalancerIPs: ""}},
	{Name: "lb IPs CIDR is not an address", In: map[string]string{LoadBalancerIPs: "198.18.128.0/24"},
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "198.18.128.0/24", Contains: "a CIDR is not an address"}}},
	{Name: "lb IPs garbage", In: map[string]string{LoadBalancerIPs: "198.18.128.10,nope"},
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "nope", Contains: "not an IP address"}}},
	{Name: "lb IPs zone", In: map[string]string{LoadBalancerIPs: "fe80::1%eth0"},
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "fe80::1%eth0", Contains: "zone"}}},
	{Name: "lb IPs v4-mapped", In: map[string]string{LoadBalancerIPs: "::ffff:198.18.128.1"},
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "::ffff:198.18.128.1", Contains: "write 198.18.128.1"}}},
	{Name: "lb IPs MetalLB alias", In: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") }},
	{Name: "lb IPs legacy MetalLB alias", In: map[string]string{MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.11") }},
	{Name: "lb IPs kube-vip alias", In: map[string]string{KubeVIPLoadBalancerIPs: "198.18.128.12"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.12") }},
	{Name: "lb IPs key and aliases agree", In: map[string]string{
		LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "198.18.128.10, 2001:db8::10", KubeVIPLoadBalancerIPs: " 198.18.128.10 ,2001:db8:0::10"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") }},
	{Name: "lb IPs alias conflicts", In: map[string]string{LoadBalancerIPs: "198.18.128.10", KubeVIPLoadBalancerIPs: "198.18.128.99"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		Errs: []wantErr{{Key: KubeVIPLoadBalancerIPs, Bad: "198.18.128.99", Contains: "conflicts with portico-lb.io/loadBalancerIPs"}}},
	{Name: "lb IPs aliases conflict with each other", In: map[string]string{MetalLBLoadBalancerIPs: "198.18.128.10", MetalLBLegacyLoadBalancerIPs: "198.18.128.11"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		Errs: []wantErr{{Key: MetalLBLegacyLoadBalancerIPs, Bad: "198.18.128.11", Contains: "conflicts with metallb.io/loadBalancerIPs"}}},
	{Name: "lb IPs order matters", In: map[string]string{LoadBalancerIPs: "198.18.128.10,2001:db8::10", MetalLBLoadBalancerIPs: "2001:db8::10,198.18.128.10"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10", "2001:db8::10") },
		Errs: []wantErr{{Key: MetalLBLoadBalancerIPs, Bad: "2001:db8::10,198.18.128.10", Contains: "conflicts with"}}},
	{Name: "lb IPs invalid key, valid alias is used", In: map[string]string{LoadBalancerIPs: "bad", MetalLBLoadBalancerIPs: "198.18.128.10"},
		Want: func(s *Spec) { s.RequestedIPs = addrs("198.18.128.10") },
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "bad", Contains: "not an IP address"}}},

	// aws-load-balancer-internal
	{Name: "aws internal true", In: map[string]string{AWSLoadBalancerInternal: "true"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "aws internal CIDR means internal", In: map[string]string{AWSLoadBalancerInternal: "0.0.0.0/0"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "aws internal yes means internal", In: map[string]string{AWSLoadBalancerInternal: "yes"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "aws internal False means internal", In: map[string]string{AWSLoadBalancerInternal: "False"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "aws internal false", In: map[string]string{AWSLoadBalancerInternal: "false"}},
	{Name: "aws internal empty", In: map[string]string{AWSLoadBalancerInternal: ""}},
	{Name: "internal keys agree", In: map[string]string{Internal: "true", AWSLoadBalancerInternal: "yes"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "internal keys agree on false", In: map[string]string{Internal: "false", AWSLoadBalancerInternal: ""}},
	{Name: "internal keys disagree", In: map[string]string{Internal: "true", AWSLoadBalancerInternal: "false"},
		Want: func(s *Spec) { s.Internal = true },
		Errs: []wantErr{{Key: AWSLoadBalancerInternal, Bad: "false", Contains: "conflicts with portico-lb.io/internal"}}},
	{Name: "internal keys disagree the other way", In: map[string]string{Internal: "false", AWSLoadBalancerInternal: "0.0.0.0/0"},
		Errs: []wantErr{{Key: AWSLoadBalancerInternal, Bad: "0.0.0.0/0", Contains: "conflicts with portico-lb.io/internal"}}},
	{Name: "invalid portico internal does not conflict", In: map[string]string{Internal: "yes", AWSLoadBalancerInternal: "true"},
		Want: func(s *Spec) { s.Internal = true },
		Errs: []wantErr{{Key: Internal, Bad: "yes", Contains: `"true" or "false"`}}},
	{Name: "tags empty value", In: map[string]string{AWSAdditionalResourceTags: ""}},

	// unknown and foreign keys
	{Name: "portico typo", In: map[string]string{"portico-lb.io/interal": "true"},
		Errs: []wantErr{{Key: "portico-lb.io/interal", Bad: "true", Contains: `did you mean "portico-lb.io/internal"`}}},
	{Name: "portico kube-vip casing", In: map[string]string{"portico-lb.io/loadbalancerIPs": "198.18.128.1"},
		Errs: []wantErr{{Key: "portico-lb.io/loadbalancerIPs", Bad: "198.18.128.1", Contains: `did you mean "portico-lb.io/loadBalancerIPs"`}}},
	{Name: "portico unknown far from everything", In: map[string]string{"portico-lb.io/something-else": "x"},
		Errs: []wantErr{{Key: "portico-lb.io/something-else", Bad: "x", Contains: "unknown portico-lb.io/ annotation; known keys: portico-lb.io/internal"}}},
	{Name: "foreign keys are ignored", In: map[string]string{
		"metallb.io/ip-allocated-from-pool": "x", "kube-vip.io/vipHost": "n1", "example.com/whatever": "y",
		"service.beta.kubernetes.io/aws-load-balancer-name": "x", "portico-lb.iox/internal": "nope"}},

	// aws-load-balancer-scheme
	{Name: "scheme internal", In: map[string]string{AWSLoadBalancerScheme: "internal"}, Want: func(s *Spec) { s.Internal = true }},
	{Name: "scheme internet-facing agrees with internal false", In: map[string]string{AWSLoadBalancerScheme: "internet-facing", Internal: "false"}},
	{Name: "scheme conflicts with the AWS internal key", In: map[string]string{AWSLoadBalancerScheme: "internet-facing", AWSLoadBalancerInternal: "true"},
		Want: func(s *Spec) { s.Internal = true },
		Errs: []wantErr{{Key: AWSLoadBalancerScheme, Bad: "internet-facing", Contains: "conflicts with service.beta.kubernetes.io/aws-load-balancer-internal"}}},
	{Name: "scheme bad value", In: map[string]string{AWSLoadBalancerScheme: "Internal"}, Errs: []wantErr{{Key: AWSLoadBalancerScheme, Bad: "Internal", Contains: `"internal" or "internet-facing"`}}},
	{Name: "lb IPs duplicate", In: map[string]string{LoadBalancerIPs: "2001:db8::10,2001:DB8:0::10"},
		Errs: []wantErr{{Key: LoadBalancerIPs, Bad: "2001:DB8:0::10", Contains: "duplicate address"}}},

	// several problems at once, sorted by key; providers' keys are theirs to judge
	{Name: "every problem reported in key order", In: map[string]string{
		Internal: "yes", AWSLoadBalancerType: "external", AddressPool: "UPPER", "portico-lb.io/zzz": "1",
		AWSHealthCheckInterval: "1", SourceRanges: "10.0.0.1", AWSSubnets: "subnet-1"},
		Errs: []wantErr{
			{Key: Internal, Bad: "yes", Contains: `"true" or "false"`},
			{Key: "portico-lb.io/zzz", Bad: "1", Contains: "unknown"},
			{Key: SourceRanges, Bad: "10.0.0.1", Contains: "10.0.0.1/32"},
		}},
}

// parseTable: each case's spec is the spec of no annotations edited by its Want.
var parseTable = annotationstest.Table[Spec]{Parse: Parse, Base: func() Spec { s, _ := Parse(nil); return s }, Cases: parseCases}

func TestParse(t *testing.T) { parseTable.Run(t) }

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
	var read []string
	var keys []annotationstest.Key
	for _, r := range commonRules {
		k, _ := lookup(r.Key)
		read = append(read, r.Key)
		keys = append(keys, annotationstest.Key{Name: k.Name, Aliases: k.Aliases})
	}
	parseTable.CheckKeys(t, read, keys)
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
		full, fullErrs := Parse(c.In)
		for _, r := range commonRules {
			k, _ := lookup(r.Key)
			got, errs := ParseKey(c.In, k.Name)
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
				t.Errorf("%s: ParseKey(%s) errors %q, Parse reports %q", c.Name, k.Name, have, want)
			}
			if k.Name == SourceRanges && len(errs) == 0 && !reflect.DeepEqual(got.SourceRanges, full.SourceRanges) {
				t.Errorf("%s: ParseKey source ranges %v, Parse %v", c.Name, got.SourceRanges, full.SourceRanges)
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
