package moto

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// Service names used in Call.Service. Classic ELB and ELBv2 share the signing name
// "elasticloadbalancing"; the API version tells them apart. Other services keep their signing
// name.
const (
	ServiceEC2   = "ec2"
	ServiceELB   = "elb"   // Classic ELB, API version 2012-06-01
	ServiceELBv2 = "elbv2" // ALB/NLB, API version 2015-12-01
	ServiceACM   = "acm"
)

// Call identifies an AWS operation: the service and the action (operation name, e.g.
// "DescribeLoadBalancers").
type Call struct {
	Service string
	Action  string
}

func (c Call) String() string { return c.Service + ":" + c.Action }

// Write reports whether the call may change state: anything but Describe*, Get* and List*.
func (c Call) Write() bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(c.Action, p) {
			return false
		}
	}
	return true
}

// Calls counts API requests per operation. SDK retries are separate requests and count.
type Calls map[Call]int

// Total is the number of requests.
func (c Calls) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Count is the number of requests for one operation.
func (c Calls) Count(service, action string) int { return c[Call{service, action}] }

// Service returns the counts of one service.
func (c Calls) Service(service string) Calls {
	return c.filter(func(k Call) bool { return k.Service == service })
}

// Writes returns the counts of the calls that may change state (see Call.Write).
func (c Calls) Writes() Calls { return c.filter(Call.Write) }

func (c Calls) filter(keep func(Call) bool) Calls {
	out := Calls{}
	for k, v := range c {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// String lists the counts sorted by operation, e.g. "ec2:DescribeVpcs=2 elbv2:CreateListener=1".
func (c Calls) String() string {
	keys := make([]Call, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// classify names the operation of a signed AWS request from its Authorization header (the
// signing name in the credential scope), its X-Amz-Target header (JSON protocols) or its form
// body (query protocols: Action and Version).
func classify(h http.Header, body []byte) Call {
	var c Call
	if _, scope, ok := strings.Cut(h.Get("Authorization"), "Credential="); ok {
		// AKID/date/region/service/aws4_request
		if parts := strings.Split(strings.SplitN(scope, ",", 2)[0], "/"); len(parts) >= 4 {
			c.Service = parts[3]
		}
	}
	var version string
	if target := h.Get("X-Amz-Target"); target != "" {
		if i := strings.LastIndexByte(target, '.'); i >= 0 {
			target = target[i+1:]
		}
		c.Action = target
	} else if form, err := url.ParseQuery(string(body)); err == nil {
		c.Action = form.Get("Action")
		version = form.Get("Version")
	}
	if c.Service == "elasticloadbalancing" {
		if version == "2015-12-01" {
			c.Service = ServiceELBv2
		} else {
			c.Service = ServiceELB
		}
	}
	return c
}

// Record clears moto's recorder and starts recording every request the server receives
// (POST /moto-api/recorder/reset-recording, start-recording). Reset stops it.
func (s *Server) Record(t testing.TB) {
	t.Helper()
	for _, p := range []string{"/moto-api/recorder/stop-recording", "/moto-api/recorder/reset-recording", "/moto-api/recorder/start-recording"} {
		if _, err := s.post(p); err != nil {
			t.Fatalf("moto: %v", err)
		}
	}
}

// Calls returns the requests recorded since Record, counted per operation, leaving out the
// harness's own requests (Seed, Owned, AddNode). Recording goes on.
func (s *Server) Calls(t testing.TB) Calls {
	t.Helper()
	resp, err := http.Get(s.URL + "/moto-api/recorder/download-recording")
	if err != nil {
		t.Fatalf("moto: downloading recording: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("moto: downloading recording: %s", resp.Status)
	}
	calls, err := parseRecording(resp.Body)
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	return calls
}

// recordedRequest is one line of moto's recording.
type recordedRequest struct {
	Headers     map[string]string `json:"headers"`
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	Body        string            `json:"body"`
	BodyEncoded bool              `json:"body_encoded"`
}

func parseRecording(r io.Reader) (Calls, error) {
	calls := Calls{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec recordedRequest
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("parsing recording line %.200q: %w", line, err)
		}
		h := http.Header{}
		for k, v := range rec.Headers {
			h.Set(k, v)
		}
		if strings.Contains(h.Get("User-Agent"), "app/"+harnessAppID) {
			continue
		}
		body := []byte(rec.Body)
		if rec.BodyEncoded {
			b, err := base64.StdEncoding.DecodeString(rec.Body)
			if err != nil {
				return nil, fmt.Errorf("decoding recorded body: %w", err)
			}
			body = b
		}
		calls[classify(h, body)]++
	}
	return calls, sc.Err()
}
