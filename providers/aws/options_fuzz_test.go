package aws

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/annotations"
)

// allNames lists every key of annotations.Keys, aliases included: ParseServiceOptions must cope
// with the keys it does not read too.
func allNames() []string {
	var names []string
	for _, k := range annotations.Keys {
		names = append(names, k.Name)
		names = append(names, k.Aliases...)
	}
	return names
}

func FuzzParseServiceOptions(f *testing.F) {
	names := allNames()
	for _, tc := range optionsCases {
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

		spec, errs := ParseServiceOptions(in)
		again, errs2 := ParseServiceOptions(in)
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
		back, errs := ParseServiceOptions(canonical)
		if errs != nil {
			t.Fatalf("re-parsing %q (from %q) failed: %v", canonical, in, errs)
		}
		if !reflect.DeepEqual(back, spec) {
			t.Fatalf("re-parse of %q changed the spec:\n got %+v\nwant %+v", canonical, back, spec)
		}
	})
}

// render writes options back as canonical annotations (the inverse of ParseServiceOptions, for tests).
func render(s ServiceOptions) map[string]string {
	m := map[string]string{}
	set := func(k, v string, ok bool) {
		if ok {
			m[k] = v
		}
	}
	join := func(items []string) string { return strings.Join(items, ",") }
	kv := func(in map[string]string) string {
		var items []string
		for k, v := range in {
			items = append(items, k+"="+v)
		}
		slices.Sort(items)
		return join(items)
	}
	seconds := func(d *time.Duration) string {
		if d == nil {
			return ""
		}
		return strconv.Itoa(int(*d / time.Second))
	}
	set(annotations.AWSLoadBalancerType, string(s.Kind), s.Kind != "")
	if s.CrossZone != nil {
		m[annotations.AWSCrossZoneLoadBalancing] = strconv.FormatBool(*s.CrossZone)
	}
	set(annotations.AWSAdditionalResourceTags, kv(s.AdditionalTags), len(s.AdditionalTags) > 0)
	set(annotations.AWSSubnets, join(s.Subnets), len(s.Subnets) > 0)
	set(annotations.AWSTargetNodeLabels, kv(s.TargetNodeLabels), len(s.TargetNodeLabels) > 0)
	set(annotations.AWSConnectionIdleTimeout, seconds(s.ConnectionIdleTimeout), s.ConnectionIdleTimeout != nil)
	set(annotations.AWSProxyProtocol, "*", s.ProxyProtocol)
	set(annotations.AWSSSLCert, s.SSLCert, s.SSLCert != "")
	set(annotations.AWSSSLPorts, join(s.SSLPorts), s.SSLPorts != nil)
	set(annotations.AWSSSLNegotiationPolicy, s.SSLNegotiationPolicy, s.SSLNegotiationPolicy != "")
	if s.ConnectionDraining != nil {
		m[annotations.AWSConnectionDrainingEnabled] = strconv.FormatBool(*s.ConnectionDraining)
	}
	set(annotations.AWSConnectionDrainingTimeout, seconds(s.ConnectionDrainingTimeout), s.ConnectionDrainingTimeout != nil)
	set(annotations.AWSSecurityGroups, join(s.SecurityGroups), len(s.SecurityGroups) > 0)
	set(annotations.AWSExtraSecurityGroups, join(s.ExtraSecurityGroups), len(s.ExtraSecurityGroups) > 0)
	set(annotations.AWSBackendProtocol, s.BackendProtocol, s.BackendProtocol != "")
	hc := s.HealthCheck
	set(annotations.AWSHealthCheckProtocol, hc.Protocol, hc.Protocol != "")
	set(annotations.AWSHealthCheckPort, hc.Port, hc.Port != "")
	set(annotations.AWSHealthCheckPath, hc.Path, hc.Path != "")
	if hc.HealthyThreshold != nil {
		m[annotations.AWSHealthCheckHealthyThreshold] = strconv.Itoa(int(*hc.HealthyThreshold))
	}
	if hc.UnhealthyThreshold != nil {
		m[annotations.AWSHealthCheckUnhealthyThreshold] = strconv.Itoa(int(*hc.UnhealthyThreshold))
	}
	set(annotations.AWSHealthCheckTimeout, seconds(hc.Timeout), hc.Timeout != nil)
	set(annotations.AWSHealthCheckInterval, seconds(hc.Interval), hc.Interval != nil)
	al := s.AccessLog
	if al.Enabled != nil {
		m[annotations.AWSAccessLogEnabled] = strconv.FormatBool(*al.Enabled)
	}
	if al.EmitInterval != nil {
		m[annotations.AWSAccessLogEmitInterval] = strconv.Itoa(int(*al.EmitInterval))
	}
	set(annotations.AWSAccessLogS3BucketName, al.Bucket, al.Bucket != "")
	set(annotations.AWSAccessLogS3BucketPrefix, al.Prefix, al.Prefix != "")
	set(annotations.AWSTargetGroupAttributes, kv(s.TargetGroupAttributes), len(s.TargetGroupAttributes) > 0)
	set(annotations.AWSEIPAllocations, join(s.EIPAllocations), len(s.EIPAllocations) > 0)
	var priv []string
	for _, a := range s.PrivateIPv4Addresses {
		priv = append(priv, a.String())
	}
	set(annotations.AWSPrivateIPv4Addresses, join(priv), len(priv) > 0)
	set(annotations.AWSNLBTargetType, s.NLBTargetType, s.NLBTargetType != "")
	set(annotations.AWSIPAddressType, s.IPAddressType, s.IPAddressType != "")
	if s.ManageBackendSecurityGroupRules != nil {
		m[annotations.AWSManageBackendSecurityGroupRules] = strconv.FormatBool(*s.ManageBackendSecurityGroupRules)
	}
	set(annotations.AWSALPNPolicy, s.ALPNPolicy, s.ALPNPolicy != "")
	return m
}

// TestRenderRoundTrip checks the test helper itself on every clean table case.
func TestRenderRoundTrip(t *testing.T) {
	for _, tc := range optionsCases {
		spec, errs := ParseServiceOptions(tc.in)
		if errs != nil {
			continue
		}
		back, errs := ParseServiceOptions(render(spec))
		if errs != nil || !reflect.DeepEqual(back, spec) {
			t.Errorf("%s: round trip gave %+v, %v; want %+v", tc.name, back, errs, spec)
		}
	}
}
