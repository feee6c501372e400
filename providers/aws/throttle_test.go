package aws

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestParseThrottleRule(t *testing.T) {
	for _, tt := range []struct {
		in, want string // want "" = error
	}{
		{"Elastic Load Balancing v2:RegisterTargets|DeregisterTargets=4:20", "Elastic Load Balancing v2:^(?:RegisterTargets|DeregisterTargets)$=4:20"},
		{"EC2:Describe.*=0.5:1", "EC2:^(?:Describe.*)$=0.5:1"},
		{"EC2=1:1", ""},
		{"EC2:(=1:1", ""},
		{"EC2:.*=0:1", ""},
		{"EC2:.*=1:0", ""},
		{"EC2:.*=1", ""},
		{":.*=1:1", ""},
	} {
		r, err := ParseThrottleRule(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%q parsed as %v, want an error", tt.in, r)
		case tt.want != "" && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.want != "" && r.String() != tt.want:
			t.Errorf("%q parsed as %q, want %q", tt.in, r, tt.want)
		}
	}
	r, _ := ParseThrottleRule("EC2:Describe.*=1:1")
	if r.Operation.MatchString("XDescribeInstances") || !r.Operation.MatchString("DescribeInstances") {
		t.Errorf("the operation pattern must match whole names")
	}
}

const throttlingError = `<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r</RequestId></ErrorResponse>`

const emptyDescribe = `<DescribeLoadBalancersResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/">
  <DescribeLoadBalancersResult><LoadBalancerDescriptions/></DescribeLoadBalancersResult>
  <ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata>
</DescribeLoadBalancersResponse>`

func limitedProvider(t *testing.T, answer func(action string) (int, string), opts Options) (*Provider, *prometheus.Registry, *recorder) {
	t.Helper()
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	opts.ClusterName, opts.Logger, opts.Metrics = "c1", logr.Discard(), reg
	p, err := NewWithConfig(awsConfig(srv.URL), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, reg, rec
}

// metricValue is the value of the series of name with the given service and operation (the
// sample count for a histogram).
func metricValue(t *testing.T, reg *prometheus.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "operation") != op {
				continue
			}
			switch {
			case m.Histogram != nil:
				v += float64(m.GetHistogram().GetSampleCount())
			default:
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestRetriesRecorded: the SDK's standard retryer retries throttling as often as configured,
// and the retries, the call and its latency are counted once per operation.
func TestRetriesRecorded(t *testing.T) {
	var n atomic.Int32
	answer := func(string) (int, string) {
		if n.Add(1) <= 2 {
			return 400, throttlingError
		}
		return 200, emptyDescribe
	}
	three := 3
	p, reg, rec := limitedProvider(t, answer, Options{MaxRetries: &three, MaxBackoff: 20 * time.Millisecond})
	if _, err := p.api.classic.DescribeLoadBalancers(context.Background(), &elb.DescribeLoadBalancersInput{}); err != nil {
		t.Fatalf("DescribeLoadBalancers after two throttled attempts: %v", err)
	}
	if got := len(rec.actions); got != 3 {
		t.Errorf("the server saw %d attempts, want 3", got)
	}
	for name, want := range map[string]float64{
		"portico_aws_api_retries_total":         2,
		"portico_aws_api_calls_total":           1,
		"portico_aws_api_call_duration_seconds": 1,
	} {
		if got := metricValue(t, reg, name, "DescribeLoadBalancers"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// No retries: the first throttled attempt is the answer.
	n.Store(0)
	zero := 0
	p, reg, rec = limitedProvider(t, answer, Options{MaxRetries: &zero})
	if _, err := p.api.classic.DescribeLoadBalancers(context.Background(), &elb.DescribeLoadBalancersInput{}); !isCode(err, "Throttling") {
		t.Errorf("with no retries: %v, want the Throttling error", err)
	}
	if len(rec.actions) != 1 || metricValue(t, reg, "portico_aws_api_retries_total", "DescribeLoadBalancers") != 0 {
		t.Errorf("with no retries: %d attempts, retries metric %v", len(rec.actions), metricValue(t, reg, "portico_aws_api_retries_total", "DescribeLoadBalancers"))
	}
}

// TestThrottleRecorded: a rule of 20 requests per second with a burst of 1 spaces 11 calls of
// the matching operation over at least 500 ms and counts the wait; other operations do not wait.
func TestThrottleRecorded(t *testing.T) {
	answer := func(action string) (int, string) {
		if action == "DescribeTags" {
			return 200, `<DescribeTagsResponse><DescribeTagsResult><TagDescriptions/></DescribeTagsResult></DescribeTagsResponse>`
		}
		return 200, emptyDescribe
	}
	rule, err := ParseThrottleRule("Elastic Load Balancing:DescribeLoadBalancers=20:1")
	if err != nil {
		t.Fatal(err)
	}
	p, reg, rec := limitedProvider(t, answer, Options{Throttle: []ThrottleRule{rule}})
	ctx := context.Background()
	start := time.Now()
	for range 11 {
		if _, err := p.api.classic.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{}); err != nil {
			t.Fatal(err)
		}
	}
	// A lower bound only: load makes it slower, never faster.
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Errorf("11 calls limited to 20/s with burst 1 took %v, want at least 500 ms", took)
	}
	if waited := metricValue(t, reg, "portico_aws_api_throttle_wait_seconds_total", "DescribeLoadBalancers"); waited < 0.4 {
		t.Errorf("throttle wait counted %.3f s, want about 0.5 s", waited)
	}
	for range 5 {
		if _, err := p.api.classic.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if waited := metricValue(t, reg, "portico_aws_api_throttle_wait_seconds_total", "DescribeTags"); waited != 0 {
		t.Errorf("DescribeTags, matched by no rule, waited %.3f s", waited)
	}
	if len(rec.actions) != 16 {
		t.Errorf("the server saw %d requests, want 16", len(rec.actions))
	}
}
