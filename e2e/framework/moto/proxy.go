package moto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
)

// Fault is what the proxy does to a call a Rule selects.
type Fault int

const (
	// Throttle answers with the service's throttling error in its own protocol: EC2
	// RequestLimitExceeded (HTTP 503, EC2 XML), query services such as Classic ELB and ELBv2
	// Throttling (HTTP 400, ErrorResponse XML), JSON services ThrottlingException (HTTP 400).
	Throttle Fault = iota + 1
	// Drop closes the connection without an answer, after reading the request.
	Drop
)

func (f Fault) String() string {
	switch f {
	case Throttle:
		return "throttle"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Rule selects calls to fault. Service and Action match exactly when set (see Call; "" matches
// any). With Probability 0 the rule faults the next Times matching calls; with Probability p in
// (0, 1] it faults each matching call with probability p, drawn from a generator seeded with
// Seed, at most Times times when Times > 0. The first rule that applies wins.
type Rule struct {
	Service     string
	Action      string
	Fault       Fault
	Times       int
	Probability float64
	Seed        uint64
}

type rule struct {
	Rule
	fired int
	rng   *rand.Rand
}

func (r *rule) apply(c Call) bool {
	if (r.Service != "" && r.Service != c.Service) || (r.Action != "" && r.Action != c.Action) {
		return false
	}
	if r.Times > 0 && r.fired >= r.Times {
		return false
	}
	if r.Probability > 0 && r.rng.Float64() >= r.Probability {
		return false
	}
	r.fired++
	return true
}

// Proxy is a reverse proxy on 127.0.0.1 in front of a Server that injects faults by rule and
// counts the calls it receives, faulted or not.
type Proxy struct {
	// URL is the proxy's endpoint; AWSConfig points the SDK at it.
	URL string

	srv    *Server
	hs     *httptest.Server
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	rules  []*rule
	calls  Calls
	faults Calls
	onCall func(Call)
	// awsDefaults: fill in what AWS gives a new resource and moto does not (AWSDefaults).
	awsDefaults bool
}

// AWSDefaults makes the proxy answer as AWS does where moto 5.2.5 does not, in two places
// cloud-provider-aws depends on: a Classic ELB created through it gets AWS's default health
// check (TCP on the first listener's instance port, interval 30 s, timeout 5 s, healthy 10,
// unhealthy 2) before the create is answered (cloud-provider-aws dereferences it; against bare
// moto it panics); and NLB DNS names are answered in AWS's form
// "<name>-<id>.elb.<region>.amazonaws.com" (moto's "<region>.elb.amazonaws.com" form is the
// Classic one, and cloud-provider-aws refuses every later update of such an NLB as a change of
// kind). LoadBalancerByDNS accepts both forms.
func (p *Proxy) AWSDefaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awsDefaults = true
}

// Proxy starts a fault-injecting proxy in front of s, closed when t ends.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	p := &Proxy{srv: s, calls: Calls{}, faults: Calls{}}
	p.rp = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	// httptest listens on 127.0.0.1 only.
	p.hs = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.hs.URL
	t.Cleanup(p.hs.Close)
	return p
}

// AWSConfig is Server.AWSConfig pointed at the proxy.
func (p *Proxy) AWSConfig(ctx context.Context) aws.Config { return configFor(p.URL, p.srv.Region) }

// Inject adds a rule after the existing ones.
func (p *Proxy) Inject(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &rule{Rule: r, rng: rand.New(rand.NewPCG(r.Seed, 0x9e3779b97f4a7c15))})
}

// Clear removes all rules.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// OnCall sets a function called with every call before it is faulted or forwarded (nil
// removes it), e.g. to kill the process under test at the Nth write. It runs on the request's
// goroutine and delays the call until it returns.
func (p *Proxy) OnCall(fn func(Call)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onCall = fn
}

// Calls returns the calls the proxy received, faulted ones included.
func (p *Proxy) Calls() Calls {
	p.mu.Lock()
	defer p.mu.Unlock()
	return copyCalls(p.calls)
}

// Faults returns the calls the proxy faulted.
func (p *Proxy) Faults() Calls {
	p.mu.Lock()
	defer p.mu.Unlock()
	return copyCalls(p.faults)
}

func copyCalls(c Calls) Calls {
	out := make(Calls, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := classify(r.Header, body)
	p.mu.Lock()
	p.calls[call]++
	var fault Fault
	for _, rl := range p.rules {
		if rl.apply(call) {
			fault = rl.Fault
			p.faults[call]++
			break
		}
	}
	hook := p.onCall
	defaults := p.awsDefaults
	p.mu.Unlock()
	if hook != nil {
		hook(call)
	}
	switch fault {
	case Throttle:
		writeThrottle(w, r, call)
	case Drop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if defaults && call.Service == ServiceELB && call.Action == "CreateLoadBalancer" {
			p.createClassic(w, r, body)
			return
		}
		if defaults && call.Service == ServiceELBv2 && (call.Action == "CreateLoadBalancer" || call.Action == "DescribeLoadBalancers") {
			p.nlbDNSNames(w, r)
			return
		}
		p.rp.ServeHTTP(w, r)
	}
}

var dnsNameRE = regexp.MustCompile(`<DNSName>([^<]+)</DNSName>`)

// nlbDNSNames forwards an ELBv2 call and answers with every DNS name in AWS's NLB form
// (moto gives NLBs the Classic form, which cloud-provider-aws takes for a Classic ELB).
func (p *Proxy) nlbDNSNames(w http.ResponseWriter, r *http.Request) {
	r.Header.Del("Accept-Encoding")
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	out := dnsNameRE.ReplaceAllFunc(rec.Body.Bytes(), func(m []byte) []byte {
		name := dnsNameRE.FindSubmatch(m)[1]
		return []byte("<DNSName>" + nlbDNS(string(name)) + "</DNSName>")
	})
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

// createClassic forwards a Classic CreateLoadBalancer and, when it succeeded, configures AWS's
// default health check before answering.
func (p *Proxy) createClassic(w http.ResponseWriter, r *http.Request, body []byte) {
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	if rec.Code < 300 {
		form, err := url.ParseQuery(string(body))
		if err == nil && form.Get("LoadBalancerName") != "" {
			port := form.Get("Listeners.member.1.InstancePort")
			cl := elb.NewFromConfig(p.srv.harnessConfig())
			_, err = cl.ConfigureHealthCheck(r.Context(), &elb.ConfigureHealthCheckInput{
				LoadBalancerName: aws.String(form.Get("LoadBalancerName")),
				HealthCheck: &elbtypes.HealthCheck{Target: aws.String("TCP:" + port), Interval: aws.Int32(30), Timeout: aws.Int32(5),
					HealthyThreshold: aws.Int32(10), UnhealthyThreshold: aws.Int32(2)},
			})
		}
		if err != nil {
			http.Error(w, "moto proxy: default health check: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

const requestID = "00000000-0000-4000-8000-000000000000"

func writeThrottle(w http.ResponseWriter, r *http.Request, c Call) {
	switch {
	case r.Header.Get("X-Amz-Target") != "":
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Errortype", "ThrottlingException")
		w.Header().Set("X-Amzn-Requestid", requestID)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
	case c.Service == ServiceEC2:
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>%s</RequestID></Response>`, requestID)
	default:
		ns := "http://" + c.Service + ".amazonaws.com/doc/"
		switch c.Service {
		case ServiceELB:
			ns = "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/"
		case ServiceELBv2:
			ns = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
		}
		w.Header().Set("Content-Type", "text/xml")
		w.Header().Set("X-Amzn-Requestid", requestID)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>%s</RequestId></ErrorResponse>`, ns, requestID)
	}
}
