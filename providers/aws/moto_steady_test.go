//go:build moto

package aws

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-logr/logr/testr"

	"github.com/portico-lb/portico/providers"
)

// steadyProvider is a provider with a clock the test moves and a switch that makes one AWS
// operation fail.
type steadyProvider struct {
	*Provider
	offset atomic.Int64 // added to time.Now
	failOp atomic.Value // string: operation name that fails, "" for none
}

func (f *fixture) steadyProvider(defaultType Kind) *steadyProvider {
	f.reg = f.newRegistry()
	sp := &steadyProvider{}
	sp.failOp.Store("")
	cfg := awsConfig(f.url)
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("TestFault",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if op := sp.failOp.Load().(string); op != "" && awsmiddleware.GetOperationName(ctx) == op {
					return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("injected failure")
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
	p, err := NewWithConfig(cfg, Options{
		ClusterName: testCluster, DefaultType: defaultType, Logger: testr.New(f.t), Metrics: f.reg,
		VerifyPeriod: time.Hour,
		now:          func() time.Time { return time.Now().Add(time.Duration(sp.offset.Load())) },
	})
	must(f.t, err)
	sp.Provider = p
	return sp
}

// ensureAll ensures every Service from workers goroutines, as the controller's workers do.
func ensureAll(t *testing.T, p *Provider, lbs []*providers.LoadBalancer, workers int) []error {
	t.Helper()
	errs := make([]error, len(lbs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				_, errs[i] = p.Ensure(context.Background(), lbs[i])
			}
		})
	}
	for i := range lbs {
		work <- i
	}
	close(work)
	wg.Wait()
	return errs
}

// delta is the provider's own count of operations between two snapshots, split into reads
// (Describe*) and writes.
func delta(before, after map[string]float64) (reads, writes map[string]int) {
	reads, writes = map[string]int{}, map[string]int{}
	for op, n := range after {
		d := int(n - before[op])
		if d == 0 {
			continue
		}
		if isRead(op) {
			reads[op] = d
		} else {
			writes[op] = d
		}
	}
	return reads, writes
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// motoRecorder drives moto's request recorder: every request moto receives, one JSON line each.
type motoRecorder struct {
	t   *testing.T
	url string
}

func (r motoRecorder) post(action string) {
	resp, err := http.Post(r.url+"/moto-api/recorder/"+action, "", nil)
	must(r.t, err)
	resp.Body.Close()
}

func (r motoRecorder) start() { r.post("reset-recording"); r.post("start-recording") }

// stop returns the number of requests recorded per action.
func (r motoRecorder) stop() map[string]int {
	r.post("stop-recording")
	resp, err := http.Get(r.url + "/moto-api/recorder/download-recording")
	must(r.t, err)
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		// One JSON object per request; the form-encoded body (Action=...) is base64.
		var req struct {
			Body string `json:"body"`
		}
		must(r.t, json.Unmarshal([]byte(line), &req))
		body, err := base64.StdEncoding.DecodeString(req.Body)
		must(r.t, err)
		form, err := url.ParseQuery(string(body))
		must(r.t, err)
		action := form.Get("Action")
		out[action]++
	}
	must(r.t, sc.Err())
	return out
}

// TestSteadyStateCallsMoto: 40 NLB Services and 20 Classic ELB Services, ensured concurrently
// by 4 workers with nothing changed, make no write and at most one DescribeLoadBalancers and
// one DescribeTags per 20 Services of a kind; a listener deleted out of band is repaired at the
// next verification, and an Ensure after a failed one converges in full.
func TestSteadyStateCallsMoto(t *testing.T) {
	f := seed(t, 3)
	sp := f.steadyProvider(Classic)
	p := sp.Provider
	var lbs []*providers.LoadBalancer
	for i := range 60 {
		lb := testLB(fmt.Sprintf("svc%02d", i), f.nodes)
		lb.Ports = []providers.Port{
			{Name: "a", Protocol: providers.TCP, Port: 80, NodePort: 30080},
			{Name: "b", Protocol: providers.TCP, Port: 443, NodePort: 30443},
		}
		if i < 40 {
			optsOf(lb).Kind = NLB
		}
		lbs = append(lbs, lb)
	}
	for i, err := range ensureAll(t, p, lbs, 4) {
		if err != nil {
			t.Fatalf("creating %s: %v", lbs[i].Ref, err)
		}
	}

	rec := motoRecorder{t: t, url: f.url}
	round := func(what string) (reads, writes map[string]int, moto map[string]int) {
		t.Helper()
		before := f.calls()
		rec.start()
		for i, err := range ensureAll(t, p, lbs, 4) {
			if err != nil {
				t.Fatalf("%s: Ensure(%s): %v", what, lbs[i].Ref, err)
			}
		}
		moto = rec.stop()
		reads, writes = delta(before, f.calls())
		t.Logf("%s, 40 NLB + 20 Classic Services, 4 workers: reads %v, writes %v; moto recorded %v", what, reads, writes, moto)
		return reads, writes, moto
	}

	reads, writes, moto := round("no-op resync")
	if len(writes) != 0 {
		t.Errorf("no-op resync wrote: %v", writes)
	}
	for op, limit := range map[string]int{
		"Elastic Load Balancing v2:DescribeLoadBalancers": 2, "Elastic Load Balancing v2:DescribeTags": 2,
		"Elastic Load Balancing:DescribeLoadBalancers": 1, "Elastic Load Balancing:DescribeTags": 1,
	} {
		if reads[op] > limit {
			t.Errorf("no-op resync made %d %s calls, want at most %d (one per 20 Services)", reads[op], op, limit)
		}
	}
	if n := total(reads); n > 6 {
		t.Errorf("no-op resync made %d reads in all, want at most 6: %v", n, reads)
	}
	var recorded int
	for action, n := range moto {
		recorded += n
		if !strings.HasPrefix(action, "Describe") {
			t.Errorf("moto recorded %d %s requests in a no-op resync", n, action)
		}
	}
	if recorded != total(reads) {
		t.Errorf("moto recorded %d requests (%v), the provider counted %d operations", recorded, moto, total(reads))
	}

	// Out of band: a listener of svc00 goes. Within the verify period nothing reads it back.
	c := elbv2.NewFromConfig(awsConfig(f.url))
	name := lbName(testCluster, lbs[0].Ref, NLB, schemeInternetFacing)
	listeners := func() []int32 {
		out, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
		must(t, err)
		ls, err := c.DescribeListeners(context.Background(), &elbv2.DescribeListenersInput{LoadBalancerArn: out.LoadBalancers[0].LoadBalancerArn})
		must(t, err)
		var ports []int32
		for _, l := range ls.Listeners {
			ports = append(ports, aws.ToInt32(l.Port))
		}
		slices.Sort(ports)
		return ports
	}
	out, err := c.DescribeLoadBalancers(context.Background(), &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	must(t, err)
	ls, err := c.DescribeListeners(context.Background(), &elbv2.DescribeListenersInput{LoadBalancerArn: out.LoadBalancers[0].LoadBalancerArn})
	must(t, err)
	for _, l := range ls.Listeners {
		if aws.ToInt32(l.Port) == 443 {
			_, err := c.DeleteListener(context.Background(), &elbv2.DeleteListenerInput{ListenerArn: l.ListenerArn})
			must(t, err)
		}
	}
	sp.offset.Store(int64(30 * time.Minute))
	round("no-op resync after a listener was deleted out of band, within the verify period")
	if got := listeners(); !slices.Equal(got, []int32{80}) {
		t.Fatalf("listeners of %s = %v: the deletion should not be seen before the verify period", name, got)
	}

	// Past the verify period every load balancer is read back and svc00's listener returns.
	sp.offset.Store(int64(61 * time.Minute))
	reads, writes, _ = round("verification after the verify period")
	if got := listeners(); !slices.Equal(got, []int32{80, 443}) {
		t.Errorf("after verification, listeners of %s = %v, want [80 443]", name, got)
	}
	if writes["Elastic Load Balancing v2:CreateListener"] != 1 || total(writes) != 1 {
		t.Errorf("verification wrote %v, want exactly the one missing listener", writes)
	}
	t.Logf("verification: %d reads for 60 Services", total(reads))

	// A failed Ensure is followed by a full one, verify period or not.
	sp.offset.Store(int64(122 * time.Minute))
	sp.failOp.Store("DescribeListeners")
	if _, err := p.Ensure(context.Background(), lbs[1]); err == nil {
		t.Fatalf("Ensure with DescribeListeners failing succeeded")
	}
	sp.failOp.Store("")
	before := f.calls()
	ensure(t, p, lbs[1])
	reads, _ = delta(before, f.calls())
	if reads["Elastic Load Balancing v2:DescribeListeners"] != 1 {
		t.Errorf("Ensure after a failure read %v, want a full convergence (DescribeListeners)", reads)
	}
	before = f.calls()
	ensure(t, p, lbs[1])
	if reads, _ := delta(before, f.calls()); reads["Elastic Load Balancing v2:DescribeListeners"] != 0 {
		t.Errorf("the Ensure after a successful full one read %v, want the batched reads only", reads)
	}
}
