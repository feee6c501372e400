package aws

import (
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
	optionsTable.Fuzz(f, allNames(), render)
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
func TestRenderRoundTrip(t *testing.T) { optionsTable.CheckRoundTrip(t, render) }
