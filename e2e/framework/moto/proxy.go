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
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
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
		p.rp.ServeHTTP(w, r)
	}
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
