//go:build moto

package aws

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// withAnnotations sets lb's options from Service annotations, as the controller does.
func withAnnotations(t *testing.T, lb *providers.LoadBalancer, ann map[string]string) {
	t.Helper()
	opts, errs := ParseServiceOptions(ann)
	if len(errs) > 0 {
		t.Fatalf("parsing %v: %v", ann, errs)
	}
	lb.Options = opts
}

// TestAnnotationRemovalRestoresDefaultsMoto: every attribute annotation set, then removed; the
// load balancer in moto returns to the documented defaults (Classic: cross-zone off, idle
// timeout 60 s, draining off with 300 s, access logs off; NLB: cross-zone and access logs off,
// target-group attributes at AWS's defaults).
func TestAnnotationRemovalRestoresDefaultsMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.provider(Classic)
	ctx := context.Background()

	classic := testLB("attrs-classic", f.nodes)
	withAnnotations(t, classic, map[string]string{
		annotations.AWSCrossZoneLoadBalancing:    "true",
		annotations.AWSConnectionIdleTimeout:     "300",
		annotations.AWSConnectionDrainingEnabled: "true",
		annotations.AWSConnectionDrainingTimeout: "45",
		annotations.AWSAccessLogEnabled:          "true",
		annotations.AWSAccessLogEmitInterval:     "5",
		annotations.AWSAccessLogS3BucketName:     "portico-logs",
		annotations.AWSAccessLogS3BucketPrefix:   "elb",
	})
	ensure(t, p, classic)
	name := lbName(testCluster, classic.Ref, Classic, schemeInternetFacing)
	read := func() string {
		out, err := elb.NewFromConfig(awsConfig(f.url)).DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(name)})
		must(t, err)
		return classicAttrString(out.LoadBalancerAttributes)
	}
	if got, want := read(), "cross-zone=true idle=300 draining=true/45 logs=true/5"; got != want {
		t.Fatalf("Classic with annotations: %s, want %s", got, want)
	}
	withAnnotations(t, classic, nil)
	ensure(t, p, classic)
	if got, want := read(), "cross-zone=false idle=60 draining=false/300 logs=false"; got != want {
		t.Errorf("Classic after removing the annotations: %s, want %s", got, want)
	}

	nlb := testLB("attrs-nlb", f.nodes)
	nlbAnn := map[string]string{
		annotations.AWSLoadBalancerType:        "nlb",
		annotations.AWSCrossZoneLoadBalancing:  "true",
		annotations.AWSAccessLogEnabled:        "true",
		annotations.AWSAccessLogS3BucketName:   "portico-logs",
		annotations.AWSAccessLogS3BucketPrefix: "nlb",
		annotations.AWSTargetGroupAttributes:   "proxy_protocol_v2.enabled=true,deregistration_delay.timeout_seconds=10,stickiness.enabled=true",
	}
	withAnnotations(t, nlb, nlbAnn)
	ensure(t, p, nlb)
	nlbName := lbName(testCluster, nlb.Ref, NLB, schemeInternetFacing)
	st := f.nlbState(nlbName)
	if st.attrs["load_balancing.cross_zone.enabled"] != "true" || st.attrs["access_logs.s3.enabled"] != "true" ||
		st.tgAttrs["proxy_protocol_v2.enabled"] != "true" || st.tgAttrs["deregistration_delay.timeout_seconds"] != "10" {
		t.Fatalf("NLB with annotations: attributes %v, target group %v", st.attrs, st.tgAttrs)
	}
	withAnnotations(t, nlb, map[string]string{annotations.AWSLoadBalancerType: "nlb"})
	ensure(t, p, nlb)
	st = f.nlbState(nlbName)
	for k, v := range nlbDefaultAttributes {
		if st.attrs[k] != v {
			t.Errorf("NLB after removing the annotations: %s=%q, want %q", k, st.attrs[k], v)
		}
	}
	for k, v := range tgDefaultAttributes {
		if st.tgAttrs[k] != v {
			t.Errorf("target group after removing the annotation: %s=%q, want the default %q", k, st.tgAttrs[k], v)
		}
	}
	// A second Ensure with nothing changed writes nothing.
	before := f.calls()
	p.verified.forget(nlbName) // force a full convergence: every attribute is read back
	ensure(t, p, nlb)
	if _, writes := delta(before, f.calls()); len(writes) != 0 {
		t.Errorf("a full convergence at the defaults wrote %v", writes)
	}
	must(t, p.Delete(ctx, classic.Ref))
	must(t, p.Delete(ctx, nlb.Ref))
}

func classicAttrString(a *elbtypes.LoadBalancerAttributes) string {
	s := "cross-zone=" + boolStr(a.CrossZoneLoadBalancing != nil && a.CrossZoneLoadBalancing.Enabled)
	if a.ConnectionSettings != nil {
		s += " idle=" + itoa(aws.ToInt32(a.ConnectionSettings.IdleTimeout))
	}
	if d := a.ConnectionDraining; d != nil {
		s += " draining=" + boolStr(d.Enabled) + "/" + itoa(aws.ToInt32(d.Timeout))
	}
	if l := a.AccessLog; l != nil {
		s += " logs=" + boolStr(l.Enabled)
		if l.Enabled {
			s += "/" + itoa(aws.ToInt32(l.EmitInterval))
		}
	}
	return s
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestInvalidHealthCheckCreatesNothingMoto: health checks AWS would refuse (a Classic timeout of
// 90 s, a timeout equal to the interval on a Classic ELB, a timeout above the interval on an
// NLB) fail with an InvalidError before any call that creates something: moto records no write
// and holds nothing owned.
func TestInvalidHealthCheckCreatesNothingMoto(t *testing.T) {
	f := seed(t, 1)
	p := f.provider(Classic)
	base := map[string]string{}
	for _, ann := range []map[string]string{
		{annotations.AWSHealthCheckTimeout: "90", annotations.AWSHealthCheckInterval: "120"},
		{annotations.AWSHealthCheckTimeout: "10", annotations.AWSHealthCheckInterval: "10"},
		{annotations.AWSLoadBalancerType: "nlb", annotations.AWSHealthCheckTimeout: "40", annotations.AWSHealthCheckInterval: "30"},
	} {
		a := maps.Clone(base)
		maps.Copy(a, ann)
		lb := testLB("bad-hc", f.nodes)
		withAnnotations(t, lb, a)
		rec := motoRecorder{t: t, url: f.url}
		rec.start()
		_, err := p.Ensure(context.Background(), lb)
		calls := rec.stop()
		var inv *providers.InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("%v: Ensure returned %v, want an InvalidError", ann, err)
		}
		if len(calls) != 0 {
			t.Errorf("%v: moto recorded %v, want no call at all", ann, calls)
		}
	}
	if left := f.owned(); len(left) != 0 {
		t.Errorf("moto holds %v after rejected Services", left)
	}
}
