package aws

// Tests with recorded AWS responses, for behaviour moto 5.2.5 does not reproduce (moto
// documents its own gaps): moto copies a Classic listener's protocol into
// InstanceProtocol, so only these tests prove that an SSL->TCP listener is left alone on AWS.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// classicDescribe is DescribeLoadBalancers as AWS answers it for a Classic ELB with an SSL
// listener terminating TLS towards a TCP backend (the shape of the 2012-06-01 API).
const classicDescribe = `<DescribeLoadBalancersResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/">
  <DescribeLoadBalancersResult>
    <LoadBalancerDescriptions>
      <member>
        <LoadBalancerName>NAME</LoadBalancerName>
        <DNSName>NAME-123.us-east-1.elb.amazonaws.com</DNSName>
        <Scheme>internet-facing</Scheme>
        <VPCId>vpc-1</VPCId>
        <ListenerDescriptions>
          <member>
            <Listener>
              <Protocol>SSL</Protocol><LoadBalancerPort>443</LoadBalancerPort>
              <InstanceProtocol>INSTPROTO</InstanceProtocol><InstancePort>30443</InstancePort>
              <SSLCertificateId>arn:aws:acm:us-east-1:123456789012:certificate/c</SSLCertificateId>
            </Listener>
            <PolicyNames/>
          </member>
        </ListenerDescriptions>
        <Instances/><Subnets><member>subnet-1</member></Subnets>
        <SecurityGroups><member>sg-1</member></SecurityGroups>
      </member>
    </LoadBalancerDescriptions>
  </DescribeLoadBalancersResult>
  <ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata>
</DescribeLoadBalancersResponse>`

type recorder struct {
	mu      sync.Mutex
	actions []string
	answer  func(action string) (int, string)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	r.mu.Lock()
	r.actions = append(r.actions, action)
	r.mu.Unlock()
	code, resp := r.answer(action)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, resp)
}

func recordedProvider(t *testing.T, h http.Handler) *Provider {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p, err := NewWithConfig(awsConfig(srv.URL), Options{ClusterName: "c1", Logger: logr.Discard(), Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClassicListenerDiffRecorded(t *testing.T) {
	for _, tt := range []struct {
		instanceProtocol string
		wantWrites       string
	}{
		{"TCP", ""}, // AWS: what was asked for; nothing to do
		{"SSL", "DeleteLoadBalancerListeners,CreateLoadBalancerListeners"}, // moto's answer: a diff
	} {
		t.Run(tt.instanceProtocol, func(t *testing.T) {
			rec := &recorder{answer: func(action string) (int, string) {
				if action == "DescribeLoadBalancers" {
					return 200, strings.ReplaceAll(classicDescribe, "INSTPROTO", tt.instanceProtocol)
				}
				return 200, "<" + action + "Response><" + action + "Result/></" + action + "Response>"
			}}
			p := recordedProvider(t, rec)
			lb := testLB("svc", nil)
			lb.Ports[0].Port, lb.Ports[0].NodePort = 443, 30443
			lb.Options = ServiceOptions{Kind: Classic, SSLCert: "arn:aws:acm:us-east-1:123456789012:certificate/c"}
			d, err := p.desired(lb)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := p.findClassic(context.Background(), d.Name)
			if err != nil || cur == nil {
				t.Fatalf("findClassic: %v, %v", cur, err)
			}
			rec.actions = nil
			if err := p.reconcileClassicListeners(context.Background(), d, cur); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rec.actions, ","); got != tt.wantWrites {
				t.Errorf("calls %q, want %q", got, tt.wantWrites)
			}
		})
	}
}

// TestClassicMissingLBRecorded: moto answers HTTP 500 where AWS answers LoadBalancerNotFound
// (AccessPointNotFound in the 2012-06-01 API) for a missing Classic ELB; findClassic must treat
// AWS's answer as "absent", not as an error.
func TestClassicMissingLBRecorded(t *testing.T) {
	rec := &recorder{answer: func(string) (int, string) {
		return 400, `<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/"><Error><Type>Sender</Type><Code>LoadBalancerNotFound</Code><Message>There is no ACTIVE Load Balancer named 'x'</Message></Error><RequestId>r</RequestId></ErrorResponse>`
	}}
	p := recordedProvider(t, rec)
	cur, err := p.findClassic(context.Background(), "x")
	if err != nil || cur != nil {
		t.Fatalf("findClassic = %v, %v; want nil, nil", cur, err)
	}
	if err := p.deleteClassic(context.Background(), "x"); err != nil {
		t.Fatalf("deleteClassic of a missing ELB: %v", err)
	}
	calls := p.calls.vec.WithLabelValues("Elastic Load Balancing", "DescribeLoadBalancers", "LoadBalancerNotFound")
	if n := testutilValue(calls); n != 1 {
		t.Errorf("metric for DescribeLoadBalancers/LoadBalancerNotFound = %v, want 1", n)
	}
}

func TestConfigValidate(t *testing.T) {
	c := &Config{Region: "nowhere", Endpoint: "ftp://x", DefaultType: "alb", ExtraTags: map[string]string{"aws:x": "1"},
		Subnets: []string{"sub-1"}, SecurityGroups: []string{"group"}, VerifyPeriod: metav1.Duration{Duration: time.Second},
		APIThrottle: []string{"EC2:Describe.*=10:40", "EC2=1:1"}, MaxRetries: -1, MaxBackoff: metav1.Duration{Duration: time.Millisecond}}
	errs := c.Validate(field.NewPath("providers", "aws"))
	want := []string{"providers.aws.region", "providers.aws.endpoint", "providers.aws.defaultType", "providers.aws.extraTags[aws:x]", "providers.aws.subnets[0]", "providers.aws.securityGroups[0]",
		"providers.aws.apiThrottle[1]", "providers.aws.maxRetries", "providers.aws.maxBackoff", "providers.aws.verifyPeriod"}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want one for each of %v", errs, want)
	}
	for i, w := range want {
		if errs[i].Field != w {
			t.Errorf("error %d at %s, want %s", i, errs[i].Field, w)
		}
	}
	ok := Plugin.NewConfig().(*Config)
	ok.Region, ok.Endpoint = "eu-west-1", "http://127.0.0.1:5000"
	if errs := ok.Validate(field.NewPath("aws")); len(errs) != 0 {
		t.Errorf("valid config: %v", errs)
	}
}

func testutilValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
