package aws_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// anchorResync is cloud-provider-aws's cost of re-ensuring one single-port Service, by reading
// its source (pkg/providers/v1/aws_loadbalancer.go): NLB about 10 calls plus one per port,
// Classic ELB about 8-9 reads (taken as 9). Not measured.
var anchorResync = map[string]float64{kindNLB: 11, kindClassic: 9}

// steadyResync is the resync period of the controller measured for the steady resync: long
// enough that no second round overlaps the node-added measurement that follows.
const steadyResync = 30 * time.Second

// BenchmarkAWSCalls measures, through the real portico-controller against moto, the AWS API
// calls per Service of a create, a no-op resync (the controller restarted: every Service is
// re-ensured with nothing changed, and verified in full once), a steady resync (the running
// controller's periodic resync, answered from batched reads), a node added and a delete, for 1 and 100 single-port Services of each kind; and the time until moto holds the
// added node in every load balancer. Calls are counted by moto's recorder and cross-checked
// against the provider's portico_aws_api_calls_total.
func BenchmarkAWSCalls(b *testing.B) {
	for _, kind := range []string{kindNLB, kindClassic} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("kind=%s/services=%d", kind, n), func(b *testing.B) {
				for range b.N {
					benchAWSCalls(b, kind, n)
				}
			})
		}
	}
}

type opCost struct {
	op             string
	calls, writes  int
	describes      int
	metric         float64
	services       int
	elapsed        time.Duration
	registerCalls  int
	anchorPerSvc   float64
	loadBalancers  int
	recorderDetail string
}

func benchAWSCalls(b *testing.B, kind string, n int) {
	e := newEnv(b, envOptions{Nodes: 3, AZs: 2})
	p := e.startController(ctlOptions{})
	var costs []opCost
	measure := func(op string, act func(), settled func() bool) opCost {
		before := 0.0 // a process started by act counts from zero
		if !p.Exited() {
			before = awsMetric(b, p)
		}
		e.srv.Record(b)
		start := time.Now()
		act()
		e.eventuallyB(p, op, settled)
		elapsed := time.Since(start)
		quiesce(b, p)
		calls := e.srv.Calls(b)
		c := opCost{op: op, calls: calls.Total(), writes: calls.Writes().Total(), services: n, elapsed: elapsed,
			metric: awsMetric(b, p) - before, recorderDetail: calls.String()}
		for k, v := range calls {
			if strings.HasPrefix(k.Action, "Describe") {
				c.describes += v
			}
		}
		c.registerCalls = calls.Count(moto.ServiceELBv2, "RegisterTargets") + calls.Count(moto.ServiceELB, "RegisterInstancesWithLoadBalancer")
		if float64(c.calls) != c.metric {
			b.Errorf("%s: moto recorded %d calls, portico_aws_api_calls_total grew by %v", op, c.calls, c.metric)
		}
		costs = append(costs, c)
		return c
	}

	measure("create", func() {
		for i := range n {
			e.create(e.lbService(fmt.Sprintf("s%03d", i), kind))
		}
	}, func() bool { return e.withIngress() == n })

	// No-op resync: a new process re-ensures every Service; nothing has changed. Its first
	// Ensure of each load balancer is a full verification (applied.go).
	_ = p.Stop(process.DefaultGrace)
	c := measure("no-op resync", func() { p = e.startController(ctlOptions{Args: []string{"--resync-period=" + steadyResync.String()}}) },
		func() bool { return ensures(b, p) >= float64(n) })
	c.anchorPerSvc = anchorResync[kind]
	costs[len(costs)-1] = c
	if c.writes != 0 {
		b.Errorf("no-op resync made %d writes: %s", c.writes, c.recorderDetail)
	}

	// Steady resync: the running controller's periodic resync re-ensures every Service with
	// nothing changed; the provider answers from batched reads of the load balancers and their
	// tags (the elapsed time includes the wait for the period).
	// Measured where batching matters (it costs the wait for the period).
	if n >= 20 {
		c = measure("steady resync", func() {}, func() bool { return ensures(b, p) >= float64(2*n) })
		if c.writes != 0 {
			b.Errorf("steady resync made %d writes: %s", c.writes, c.recorderDetail)
		}
		if batches := (n + 19) / 20; c.describes > 2*batches {
			// Two kinds of batched read (load balancers, tags): at most one of each per 20 Services.
			b.Errorf("steady resync made %d Describe calls for %d Services, want at most one batched Describe of each kind per 20: %s", c.describes, n, c.recorderDetail)
		}
	}

	// One node added to every Service's load balancer.
	var added moto.Node
	c = measure("node added", func() {
		added = e.f.AddNode(b)
		e.addNode(added, nil)
	}, func() bool { return e.aws.everyLBHas(kind, added.InstanceID, n) })
	c.loadBalancers = n
	costs[len(costs)-1] = c
	if c.elapsed > 10*time.Second {
		b.Errorf("node added: converged in %s, target < 10 s", c.elapsed)
	}

	measure("delete", func() {
		for i := range n {
			e.delete(fmt.Sprintf("s%03d", i))
		}
	}, func() bool { return e.serviceCount() == 0 })
	e.expectNothingOwned()

	// Report.
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "\nAWS API calls, %s, %d Service(s), 1 port, 3->4 nodes (moto recorder; metric cross-checked)\n", kind, n)
	fmt.Fprintf(w, "%-13s %8s %8s %8s %11s %12s %10s %s\n", "operation", "calls", "/svc", "writes", "describes", "svc/describe", "elapsed", "vs cloud-provider-aws (code read)")
	for _, c := range costs {
		per := float64(c.calls) / float64(n)
		anchor := "-"
		if c.anchorPerSvc > 0 {
			anchor = fmt.Sprintf("%.1f/svc -> ratio %.2f", c.anchorPerSvc, per/c.anchorPerSvc)
		}
		perDescribe := "-"
		if c.describes > 0 {
			perDescribe = fmt.Sprintf("%.2f", float64(n)/float64(c.describes))
		}
		fmt.Fprintf(w, "%-13s %8d %8.2f %8d %11d %12s %10s %s\n", c.op, c.calls, per, c.writes, c.describes, perDescribe, c.elapsed.Round(10*time.Millisecond), anchor)
		key := strings.ReplaceAll(c.op, " ", "-")
		b.ReportMetric(per, key+"-calls/svc")
		b.ReportMetric(float64(c.writes)/float64(n), key+"-writes/svc")
		if c.op == "node added" {
			b.ReportMetric(c.elapsed.Seconds(), "node-added-converge-s")
			b.ReportMetric(float64(c.registerCalls)/float64(c.loadBalancers), "node-added-register/lb")
		}
		if c.op == "no-op resync" {
			b.ReportMetric(per/c.anchorPerSvc, "resync-ratio-vs-cpaws")
		}
		if c.op == "steady resync" {
			b.ReportMetric(float64(n)/float64(max(c.describes, 1)), "steady-resync-svc/describe")
		}
	}
	for _, c := range costs {
		fmt.Fprintf(w, "  %s: %s\n", c.op, c.recorderDetail)
	}
	_ = w.Flush()
	b.ReportMetric(0, "ns/op")
}

// eventuallyB waits until cond holds (5 minutes at most: 100 creates take a while).
func (e *env) eventuallyB(p *proc, what string, cond func() bool) {
	e.t.Helper()
	wait.For(e.t, 5*time.Minute, what, wait.True(cond), p.LogTail)
}

func (e *env) withIngress() int {
	list, err := e.cs.CoreV1().Services(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return -1
	}
	k := 0
	for _, s := range list.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			k++
		}
	}
	return k
}

func (e *env) serviceCount() int {
	list, err := e.cs.CoreV1().Services(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return -1
	}
	return len(list.Items)
}

// everyLBHas reports whether all n load balancers of the kind have instance id as a target.
func (v *awsView) everyLBHas(kind, id string, n int) bool {
	ctx, cancel := ctx30()
	defer cancel()
	k := 0
	if kind == kindClassic {
		pager := elb.NewDescribeLoadBalancersPaginator(v.elb, &elb.DescribeLoadBalancersInput{})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return false
			}
			for _, l := range page.LoadBalancerDescriptions {
				for _, in := range l.Instances {
					if aws.ToString(in.InstanceId) == id {
						k++
					}
				}
			}
		}
		return k >= n
	}
	seen := map[string]bool{}
	pager := elbv2.NewDescribeTargetGroupsPaginator(v.elbv2, &elbv2.DescribeTargetGroupsInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return false
		}
		for _, tg := range page.TargetGroups {
			arn := aws.ToString(tg.TargetGroupArn)
			if seen[arn] || len(tg.LoadBalancerArns) == 0 {
				continue
			}
			seen[arn] = true
			th, err := v.elbv2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &arn})
			if err != nil {
				return false
			}
			for _, d := range th.TargetHealthDescriptions {
				if aws.ToString(d.Target.Id) == id {
					k++
				}
			}
		}
	}
	return k >= n
}

// metricSum sums the samples of a metric family whose label set contains every filter.
func metricSum(text, name string, filters ...string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, f := range filters {
			if !strings.Contains(line, f) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func awsMetric(tb testing.TB, p *proc) float64 {
	tb.Helper()
	text, err := scrapeWait(p)
	if err != nil {
		tb.Fatalf("scraping %s: %v", p.Name(), err)
	}
	return metricSum(text, "portico_aws_api_calls_total")
}

func ensures(tb testing.TB, p *proc) float64 {
	text, err := p.scrape()
	if err != nil {
		return 0
	}
	return metricSum(text, "portico_provider_calls_total", `operation="ensure"`, `outcome="success"`)
}

// scrapeWait scrapes, waiting up to 30 s for a freshly started process's endpoint.
func scrapeWait(p *proc) (string, error) {
	var text string
	var last error
	_ = kwait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		text, last = p.scrape()
		return last == nil, nil
	})
	return text, last
}

// quiesce waits until the provider's call counter has not moved for 2 s.
func quiesce(tb testing.TB, p *proc) {
	prev, still := -1.0, time.Now()
	_ = kwait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		v := awsMetric(tb, p)
		if v != prev {
			prev, still = v, time.Now()
		}
		return time.Since(still) >= 2*time.Second, nil
	})
}
