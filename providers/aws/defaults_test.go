package aws

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// TestAttributeDefaults: a Service without an attribute annotation asks for the default of every
// managed attribute, so removing an annotation restores it.
func TestAttributeDefaults(t *testing.T) {
	for _, kind := range []Kind{Classic, NLB} {
		set := testLB("set", nil)
		ann := map[string]string{
			annotations.AWSCrossZoneLoadBalancing:      "true",
			annotations.AWSAccessLogEnabled:            "true",
			annotations.AWSAccessLogS3BucketName:       "logs",
			annotations.AWSAccessLogS3BucketPrefix:     "p",
			annotations.AWSAccessLogEmitInterval:       "5",
			annotations.AWSConnectionIdleTimeout:       "300",
			annotations.AWSConnectionDrainingEnabled:   "true",
			annotations.AWSConnectionDrainingTimeout:   "45",
			annotations.AWSTargetGroupAttributes:       "proxy_protocol_v2.enabled=true,deregistration_delay.timeout_seconds=10",
			annotations.AWSLoadBalancerType:            "nlb",
			annotations.AWSHealthCheckHealthyThreshold: "3",
		}
		if kind == Classic {
			delete(ann, annotations.AWSLoadBalancerType)
		}
		opts, errs := ParseServiceOptions(ann)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		set.Options = opts
		removed := testLB("set", nil)
		if kind == NLB {
			optsOf(removed).Kind = NLB
		}
		p := modelProvider(Classic)
		dSet, err := p.desired(set)
		if err != nil {
			t.Fatal(err)
		}
		dRemoved, err := p.desired(removed)
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case Classic:
			want := classicSpec{IdleTimeout: 60, DrainingTimeout: 300, AccessLog: classicAccessLog{EmitInterval: 60}}
			got := dRemoved.Classic
			if got.CrossZone != want.CrossZone || got.IdleTimeout != want.IdleTimeout || got.Draining != want.Draining ||
				got.DrainingTimeout != want.DrainingTimeout || got.AccessLog != want.AccessLog {
				t.Errorf("classic without annotations: %+v, want cross-zone off, idle 60, draining off/300, logs off", got)
			}
			s := dSet.Classic
			if !s.CrossZone || s.IdleTimeout != 300 || !s.Draining || s.DrainingTimeout != 45 ||
				s.AccessLog != (classicAccessLog{Enabled: true, EmitInterval: 5, Bucket: "logs", Prefix: "p"}) {
				t.Errorf("classic with annotations: %+v", s)
			}
		case NLB:
			for k, v := range map[string]string{"load_balancing.cross_zone.enabled": "false", "access_logs.s3.enabled": "false"} {
				if dRemoved.NLB.Attributes[k] != v {
					t.Errorf("NLB without annotations: %s=%q, want %q", k, dRemoved.NLB.Attributes[k], v)
				}
			}
			if _, ok := dRemoved.NLB.Attributes["access_logs.s3.bucket"]; ok {
				t.Errorf("NLB with logs off sets the bucket: %v", dRemoved.NLB.Attributes)
			}
			if dSet.NLB.Attributes["access_logs.s3.bucket"] != "logs" || dSet.NLB.Attributes["load_balancing.cross_zone.enabled"] != "true" {
				t.Errorf("NLB with annotations: %v", dSet.NLB.Attributes)
			}
			removed, set := dRemoved.NLB.Listeners[0].TG.Attributes, dSet.NLB.Listeners[0].TG.Attributes
			for k, v := range tgDefaultAttributes {
				if removed[k] != v {
					t.Errorf("target group without annotation: %s=%q, want the default %q", k, removed[k], v)
				}
			}
			if set["proxy_protocol_v2.enabled"] != "true" || set["deregistration_delay.timeout_seconds"] != "10" ||
				set["stickiness.type"] != "source_ip" {
				t.Errorf("target group with annotation: %v", set)
			}
		}
		if desiredHash(dSet) == desiredHash(dRemoved) {
			t.Errorf("%s: removing the annotations does not change the applied hash", kind)
		}
	}
}

// TestClassicAttributeChange: only what differs is sent; nil parts of the description read as
// AWS's defaults; turning logs off sends only Enabled.
func TestClassicAttributeChange(t *testing.T) {
	def := classicSpec{IdleTimeout: 60, DrainingTimeout: 300, AccessLog: classicAccessLog{EmitInterval: 60}}
	if change, changed := classicAttributeChange(def, nil); !changed || change.CrossZoneLoadBalancing != nil || change.AccessLog != nil ||
		aws.ToInt32(change.ConnectionDraining.Timeout) != 300 || aws.ToInt32(change.ConnectionSettings.IdleTimeout) != 60 {
		t.Errorf("defaults against an empty description: %+v; want the timeouts written, nothing else", change)
	}
	full := &elbtypes.LoadBalancerAttributes{
		ConnectionSettings: &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(60)},
		ConnectionDraining: &elbtypes.ConnectionDraining{Timeout: aws.Int32(300)},
	}
	if change, changed := classicAttributeChange(def, full); changed {
		t.Errorf("defaults against an ELB at its defaults: change %+v", change)
	}
	have := &elbtypes.LoadBalancerAttributes{
		CrossZoneLoadBalancing: &elbtypes.CrossZoneLoadBalancing{Enabled: true},
		ConnectionSettings:     &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(300)},
		ConnectionDraining:     &elbtypes.ConnectionDraining{Enabled: true, Timeout: aws.Int32(45)},
		AccessLog:              &elbtypes.AccessLog{Enabled: true, EmitInterval: aws.Int32(5), S3BucketName: aws.String("logs")},
	}
	change, changed := classicAttributeChange(def, have)
	if !changed || change.CrossZoneLoadBalancing.Enabled || aws.ToInt32(change.ConnectionSettings.IdleTimeout) != 60 ||
		change.ConnectionDraining.Enabled || aws.ToInt32(change.ConnectionDraining.Timeout) != 300 ||
		change.AccessLog.Enabled || change.AccessLog.S3BucketName != nil {
		t.Errorf("restoring defaults: %+v", change)
	}
	on := def
	on.AccessLog = classicAccessLog{Enabled: true, EmitInterval: 5, Bucket: "logs"}
	on.CrossZone, on.IdleTimeout, on.Draining, on.DrainingTimeout = true, 300, true, 45
	if change, changed := classicAttributeChange(on, have); changed {
		t.Errorf("equal attributes: change %+v", change)
	}
}

// TestHealthCheckRangesPerKind: the ranges AWS enforces per kind, with the defaults filling the
// values the Service does not set; an invalid one is an InvalidError at the timeout annotation.
func TestHealthCheckRangesPerKind(t *testing.T) {
	tests := []struct {
		kind              Kind
		local             bool
		timeout, interval string // "" = not set
		wantErr           string // substring; "" = valid
	}{
		{kind: Classic, timeout: "60", interval: "61"},
		{kind: Classic, timeout: "90", interval: "300", wantErr: "2-60"},
		{kind: Classic, timeout: "10", interval: "10", wantErr: "less than the interval"},
		{kind: Classic, timeout: "10", wantErr: "interval 10 s"}, // default interval 10
		{kind: Classic, timeout: "9"},
		{kind: Classic, interval: "6"}, // default timeout 5
		{kind: Classic, interval: "5", wantErr: "timeout 5 s, interval 5 s"},
		{kind: NLB, timeout: "90", interval: "120"},
		{kind: NLB, timeout: "120", interval: "120"},
		{kind: NLB, timeout: "121", interval: "300"}, // rejected at parse time (2-120)
		{kind: NLB, timeout: "20", interval: "10", wantErr: "at most the interval"},
		{kind: NLB, local: true, timeout: "20", wantErr: "interval 10 s"}, // Local default interval 10
		{kind: NLB, timeout: "20"},                                        // default interval 30
	}
	for _, tt := range tests {
		ann := map[string]string{}
		if tt.kind == NLB {
			ann[annotations.AWSLoadBalancerType] = "nlb"
		}
		if tt.timeout != "" {
			ann[annotations.AWSHealthCheckTimeout] = tt.timeout
		}
		if tt.interval != "" {
			ann[annotations.AWSHealthCheckInterval] = tt.interval
		}
		opts, errs := ParseServiceOptions(ann)
		if tt.timeout == "121" {
			if len(errs) == 0 {
				t.Errorf("timeout 121 parsed without error")
			}
			continue
		}
		if len(errs) > 0 {
			t.Fatalf("%v: %v", ann, errs)
		}
		lb := testLB("hc", nil)
		lb.Options = opts
		if tt.local {
			lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000
		}
		_, err := modelProvider(Classic).desired(lb)
		name := string(tt.kind) + " timeout=" + tt.timeout + " interval=" + tt.interval
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var inv *providers.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(inv.Field, annotations.AWSHealthCheckTimeout) {
			t.Errorf("%s: err %v, want an InvalidError at %s containing %q", name, err, annotations.AWSHealthCheckTimeout, tt.wantErr)
		}
	}
}

// TestAdoptedName: cloud-provider-aws's name is used only while the status names its load
// balancer of the same kind and scheme.
func TestAdoptedName(t *testing.T) {
	ref := providers.Ref{Namespace: "default", Name: "web", UID: "0f6e3b1c-2d4a-4c5b-9e8f-1a2b3c4d5e6f"}
	name := cloudProviderName(ref)
	if name != "a0f6e3b1c2d4a4c5b9e8f1a2b3c4d5e6" || len(name) != 32 {
		t.Fatalf("cloudProviderName = %q", name)
	}
	classic := name + "-123456789.us-east-1.elb.amazonaws.com"
	nlb := name + "-0123456789abcdef.elb.us-east-1.amazonaws.com"
	for _, tt := range []struct {
		kind      Kind
		scheme    string
		hostnames []string
		want      bool
	}{
		{Classic, schemeInternetFacing, []string{classic}, true},
		{Classic, schemeInternal, []string{classic}, false},
		{Classic, schemeInternal, []string{"internal-" + classic}, true},
		{NLB, schemeInternetFacing, []string{classic}, false},
		{NLB, schemeInternetFacing, []string{nlb}, true},
		{Classic, schemeInternetFacing, []string{nlb}, false},
		{Classic, schemeInternetFacing, []string{"k8s-web-0123-456.us-east-1.elb.amazonaws.com"}, false},
		{Classic, schemeInternetFacing, nil, false},
		{Classic, schemeInternetFacing, []string{name + ".us-east-1.elb.amazonaws.com"}, true}, // moto's form
		{Classic, schemeInternetFacing, []string{name + "x.us-east-1.elb.amazonaws.com"}, false},
	} {
		got, ok := adoptedName(ref, tt.kind, tt.scheme, tt.hostnames)
		if ok != tt.want || (ok && got != name) {
			t.Errorf("adoptedName(%s, %s, %v) = %q, %v; want %v", tt.kind, tt.scheme, tt.hostnames, got, ok, tt.want)
		}
	}
	tags := map[string]string{clusterTag("c1"): "owned", tagServiceName: "default/web"}
	if !adoptable(name, tags, "c1", ref) || adoptable(name, tags, "c2", ref) || adoptable("other", tags, "c1", ref) {
		t.Errorf("adoptable: wrong for cloud-provider-aws's tags %v", tags)
	}
	tags[tagServiceUID] = "x"
	if adoptable(name, tags, "c1", ref) {
		t.Errorf("adoptable: a load balancer carrying another Portico owner's tag")
	}
}

// TestTGAttributesByProtocol: each target group gets the defaults and the Service's values its
// protocol takes (no stickiness on TLS, no preserve_client_ip on UDP and TCP_UDP), and a key the
// Service sets that a target group does not take warns once per protocol.
func TestTGAttributesByProtocol(t *testing.T) {
	set := map[string]string{"stickiness.enabled": "true", "preserve_client_ip.enabled": "false"}
	for _, tc := range []struct {
		protocol string
		absent   []string
	}{
		{"TCP", nil},
		{"TLS", []string{"stickiness.enabled", "stickiness.type"}},
		{"UDP", []string{"preserve_client_ip.enabled"}},
		{"TCP_UDP", []string{"preserve_client_ip.enabled"}},
	} {
		got := tgAttributes(tc.protocol, set)
		for k, def := range tgDefaultAttributes {
			want, ok := def, !slices.Contains(tc.absent, k)
			if v, s := set[k]; s {
				want = v
			}
			if v, has := got[k]; has != ok || (ok && v != want) {
				t.Errorf("%s: %s=%q (set %v), want %q (set %v)", tc.protocol, k, v, has, want, ok)
			}
		}
	}
	n := nlbSpec{Listeners: []nlbListener{{TG: targetGroupSpec{Protocol: "TLS"}}, {TG: targetGroupSpec{Protocol: "TLS"}}, {TG: targetGroupSpec{Protocol: "UDP"}}}}
	w := tgAttributeWarnings(n, set)
	if len(w) != 2 || !strings.Contains(w[0], "stickiness.enabled does not apply to TLS") || !strings.Contains(w[1], "preserve_client_ip.enabled does not apply to UDP") {
		t.Errorf("warnings %q, want one for stickiness on TLS and one for preserve_client_ip on UDP", w)
	}
}
