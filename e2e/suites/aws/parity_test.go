package aws_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/cpaws"
	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/services"
)

// The parity test: cloud-provider-aws v1.36.2's cloud-controller-manager (built from the module
// proxy, e2e/framework/cpaws) and portico-controller run side by side against the same moto on
// the same Services and annotations (class-less Services for cloud-provider-aws, the env's
// class for Portico), and the test writes what each left in moto as a table. A row that differs
// must be explained in parityWhy (a deliberate difference, documented), and an explained row
// must still differ: the table cannot drift from the code silently.

var parityOut = flag.String("aws.parity", "", "write the parity table (Markdown) to this file as well")

// parityCase is one Service spec given to both controllers.
type parityCase struct {
	name string
	ann  map[string]string
	// invalid: AWS would refuse it; Portico must reject it before any call.
	invalid bool
	// removed: the annotations removed in the second phase (nil: none).
	removed []string
}

func parityCases() []parityCase {
	classicAttrs := map[string]string{
		annotations.AWSCrossZoneLoadBalancing:    "true",
		annotations.AWSConnectionIdleTimeout:     "300",
		annotations.AWSConnectionDrainingEnabled: "true",
		annotations.AWSConnectionDrainingTimeout: "45",
		annotations.AWSAccessLogEnabled:          "true",
		annotations.AWSAccessLogEmitInterval:     "5",
		annotations.AWSAccessLogS3BucketName:     "portico-logs",
		annotations.AWSAccessLogS3BucketPrefix:   "elb",
	}
	nlbAttrs := map[string]string{
		annotations.AWSLoadBalancerType:        "nlb",
		annotations.AWSCrossZoneLoadBalancing:  "true",
		annotations.AWSAccessLogEnabled:        "true",
		annotations.AWSAccessLogS3BucketName:   "portico-logs",
		annotations.AWSAccessLogS3BucketPrefix: "nlb",
		annotations.AWSTargetGroupAttributes:   "proxy_protocol_v2.enabled=true",
	}
	return []parityCase{
		{name: "classic-default", ann: map[string]string{}},
		{name: "classic-attrs", ann: classicAttrs, removed: slices.Collect(maps.Keys(classicAttrs))},
		{name: "classic-hc", ann: map[string]string{
			annotations.AWSHealthCheckInterval: "30", annotations.AWSHealthCheckTimeout: "10",
			annotations.AWSHealthCheckHealthyThreshold: "3", annotations.AWSHealthCheckUnhealthyThreshold: "4",
		}},
		{name: "classic-hc-timeout-90", invalid: true, ann: map[string]string{
			annotations.AWSHealthCheckInterval: "120", annotations.AWSHealthCheckTimeout: "90",
		}},
		{name: "classic-hc-timeout-eq-interval", invalid: true, ann: map[string]string{
			annotations.AWSHealthCheckInterval: "10", annotations.AWSHealthCheckTimeout: "10",
		}},
		{name: "nlb-default", ann: map[string]string{annotations.AWSLoadBalancerType: "nlb"}},
		{name: "nlb-attrs", ann: nlbAttrs, removed: []string{
			annotations.AWSCrossZoneLoadBalancing, annotations.AWSAccessLogEnabled, annotations.AWSAccessLogS3BucketName,
			annotations.AWSAccessLogS3BucketPrefix, annotations.AWSTargetGroupAttributes,
		}},
		{name: "nlb-hc", ann: map[string]string{
			annotations.AWSLoadBalancerType: "nlb", annotations.AWSHealthCheckInterval: "20", annotations.AWSHealthCheckTimeout: "15",
			annotations.AWSHealthCheckHealthyThreshold: "4", annotations.AWSHealthCheckUnhealthyThreshold: "5",
		}},
	}
}

// parityWhy explains each row known to differ, by "<case>/<aspect>".
var parityWhy = func() map[string]string {
	const (
		sgClassic = "deliberate: Portico attaches the cluster's shared backend security group besides the ELB's own, so node groups hold one rule for all load balancers (docs/aws.md)"
		sgNLB     = "deliberate: Portico creates NLBs with security groups (its own for source ranges, the shared backend group); cloud-provider-aws's default creates none and opens the node groups per Service"
		invalid   = "deliberate: AWS refuses this health check (Classic: timeout 2-60 s, less than the interval); moto accepts it, so cloud-provider-aws's ELB exists with it; on AWS its ConfigureHealthCheck fails after the ELB and its group exist. Portico rejects it first (Event + condition), creating nothing"
		scheme    = "moto: cloud-provider-aws sends no Scheme for an internet-facing NLB and moto stores none (AWS defaults it to internet-facing); Portico sends it"
		tgAttrs   = "moto: a new target group in moto lists no proxy_protocol_v2.enabled or preserve_client_ip.enabled, and cloud-provider-aws sets only keys the group already lists, so against moto it sets none (the annotation included); Portico writes every managed key, AWS's default where the Service names none"
		tgRemoved = "deliberate: a key removed from target-group-attributes returns to AWS's default in Portico; cloud-provider-aws keeps the last value (documented in its code), and against moto never set it (row above)"
	)
	m := map[string]string{
		"nlb-hc/health check":                                    "deliberate: cloud-provider-aws does not apply the timeout annotation to NLB target groups (its code: not configurable); Portico applies it within AWS's NLB range (2-120 s, at most the interval)",
		"classic-hc-timeout-90/result":                           invalid,
		"classic-hc-timeout-eq-interval/result":                  invalid,
		"nlb-attrs/annotations removed: target-group attributes": tgRemoved,
	}
	for _, c := range []string{"classic-default", "classic-attrs", "classic-hc"} {
		m[c+"/load balancer security groups"] = sgClassic
	}
	for _, c := range []string{"nlb-default", "nlb-attrs", "nlb-hc"} {
		m[c+"/load balancer security groups"] = sgNLB
		m[c+"/scheme"] = scheme
		m[c+"/target-group attributes"] = tgAttrs
	}
	return m
}()

type parityRow struct {
	caseName, aspect, cpa, portico, why string
}

func (r parityRow) same() bool { return r.cpa == r.portico }

// startCloudProviderAWS runs cloud-provider-aws's cloud-controller-manager (service controller
// only) against moto for the env's cluster; it stops when the test ends.
func (e *env) startCloudProviderAWS(bin, endpoint string) *process.Process {
	e.t.Helper()
	cfg := cpaws.CloudConfig{Zone: e.f.PublicSubnets[0].AZ, VPC: e.f.VPCID, SubnetID: e.f.PublicSubnets[0].ID,
		ClusterID: e.cluster, Region: e.srv.Region, URL: endpoint}
	path := filepath.Join(e.t.TempDir(), "cloud.conf")
	if err := os.WriteFile(path, []byte(cfg.Render()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + testCluster.KubeconfigPath(),
		"--cloud-provider=aws",
		"--cloud-config=" + path,
		"--cluster-name=" + e.cluster,
		"--controllers=service",
		"--leader-elect=false",
		"--configure-cloud-routes=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports.ForTest(e.t)),
		"--v=2",
	}
	return process.StartForTest(e.t, bin, process.Options{Name: cpaws.BinaryName, Args: args, Env: e.awsEnv(endpoint)})
}

// ensuredCount is how often the stock service controller reported EnsuredLoadBalancer for name
// (its events are aggregated: one Event whose count grows).
func (e *env) ensuredCount(name string) int32 {
	evs, err := services.Events(context.Background(), e.cs, e.ns, name)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int32
	for _, ev := range evs {
		if ev.Reason == "EnsuredLoadBalancer" && ev.Source.Component == "service-controller" {
			n += max(ev.Count, 1)
		}
	}
	return n
}

// withCloudProviderAWS builds (or finds in the cache) cloud-provider-aws and starts it in a new
// env against moto behind a proxy that fills moto's gaps cloud-provider-aws trips on
// (moto.Proxy.AWSDefaults: a new Classic ELB gets the health check AWS gives it, and NLB DNS
// names their real form); Portico's controller is to use the same proxy.
func withCloudProviderAWS(t *testing.T) (*env, *moto.Proxy, *process.Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	bin, err := cpaws.Ensure(ctx, cpaws.Options{Log: t.Logf})
	if err != nil {
		t.Fatalf("building cloud-provider-aws: %v", err)
	}
	e := newEnv(t, envOptions{})
	px := e.srv.Proxy(t)
	px.AWSDefaults()
	return e, px, e.startCloudProviderAWS(bin, px.URL)
}

func TestCloudProviderAWSParity(t *testing.T) {
	e, px, cpa := withCloudProviderAWS(t)
	ctl := e.startController(ctlOptions{Endpoint: px.URL})
	p := &proc{Process: cpa}

	cases := parityCases()
	for _, c := range cases {
		mut := func(s *corev1.Service) { maps.Copy(s.Annotations, c.ann) }
		e.create(e.svcs.LoadBalancer("c-"+c.name, mut))
		e.create(e.lbService("p-"+c.name, "", mut))
	}
	var rows []parityRow
	add := func(c, aspect, a, b string) {
		rows = append(rows, parityRow{caseName: c, aspect: aspect, cpa: a, portico: b, why: parityWhy[c+"/"+aspect]})
	}
	views := map[string]*lbView{}
	for _, c := range cases {
		cs, cv := e.parityOutcome(p, "c-"+c.name, false)
		ps, pv := e.parityOutcome(ctl, "p-"+c.name, c.invalid)
		views["c-"+c.name], views["p-"+c.name] = cv, pv
		if c.invalid {
			// What the user sees: a Warning Event naming the health-check timeout.
			e.svcs.WaitEvent("p-"+c.name, "InvalidSpec", annotations.AWSHealthCheckTimeout)
		}
		add(c.name, "result", cs, ps)
		if cv == nil || pv == nil {
			continue
		}
		cnp, pnp := nodePorts(e, "c-"+c.name), nodePorts(e, "p-"+c.name)
		for _, a := range parityAspects(cv, cnp) {
			add(c.name, a[0], a[1], aspectOf(parityAspects(pv, pnp), a[0]))
		}
	}

	// Phase 2: the annotations removed; both must converge again.
	for _, c := range cases {
		if c.removed == nil {
			continue
		}
		before := e.ensuredCount("c-" + c.name)
		drop := func(s *corev1.Service) {
			for _, k := range c.removed {
				delete(s.Annotations, k)
			}
		}
		e.update("c-"+c.name, drop)
		e.update("p-"+c.name, drop)
		e.eventually(p, "cloud-provider-aws ensures c-"+c.name+" again", func() (bool, string) {
			n := e.ensuredCount("c-" + c.name)
			return n > before, fmt.Sprintf("EnsuredLoadBalancer count %d (was %d)", n, before)
		})
		// Portico reports no event count to wait on; the attributes it must restore are the
		// state it means.
		cv, pv := e.reread(views["c-"+c.name]), e.reread(views["p-"+c.name])
		e.eventually(ctl, "Portico restores the defaults of p-"+c.name, func() (bool, string) {
			pv = e.reread(views["p-"+c.name])
			if why := defaultsRestored(pv); why != "" {
				return false, why
			}
			return true, ""
		})
		cnp, pnp := nodePorts(e, "c-"+c.name), nodePorts(e, "p-"+c.name)
		for _, a := range parityAspects(cv, cnp) {
			if strings.HasPrefix(a[0], "attributes") || strings.HasPrefix(a[0], "target-group") {
				add(c.name, "annotations removed: "+a[0], a[1], aspectOf(parityAspects(pv, pnp), a[0]))
			}
		}
	}

	// The table, and the rules on it.
	var b strings.Builder
	same := 0
	fmt.Fprintf(&b, "<!-- Generated by TestCloudProviderAWSParity: go test ./e2e/suites/aws -run TestCloudProviderAWSParity -args -aws.parity=$PWD/docs/aws-parity.md. DO NOT EDIT. -->\n"+
		"# Parity with cloud-provider-aws %s\n\ncloud-provider-aws's cloud-controller-manager (built from the Go module proxy) and portico-controller, "+
		"side by side against one moto %s on the same Services and annotations; what each left in moto. moto's gaps that matter here are "+
		"bridged by a proxy that answers as AWS does (Proxy.AWSDefaults: a default health check on a new Classic ELB, NLB DNS names in AWS's form). "+
		"Every difference is explained; the test fails on an unexplained difference or on an explanation whose row no longer differs.\n\n", cpaws.Version, moto.Version)
	fmt.Fprintf(&b, "| Case | Behaviour | cloud-provider-aws %s left in moto | Portico left in moto | Same? | Why |\n|---|---|---|---|---|---|\n", cpaws.Version)
	for _, r := range rows {
		verdict := "differs"
		if r.same() {
			verdict, same = "same", same+1
			if r.why != "" {
				t.Errorf("%s/%s: explained as a difference (%q) but both left %q", r.caseName, r.aspect, r.why, r.cpa)
			}
		} else if r.why == "" {
			t.Errorf("%s/%s differs without an explanation: cloud-provider-aws %q, Portico %q", r.caseName, r.aspect, r.cpa, r.portico)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.caseName, r.aspect, cell(r.cpa), cell(r.portico), verdict, r.why)
	}
	fmt.Fprintf(&b, "\n%d rows, %d the same, %d different.\n", len(rows), same, len(rows)-same)
	table := b.String()
	out := filepath.Join(os.TempDir(), "portico-aws-parity.md")
	if *parityOut != "" {
		out = *parityOut
	}
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("parity table (%s):\n%s", out, table)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// parityOutcome waits for the controller's verdict on Service name: a load balancer in moto
// (returned), or for a Service Portico must reject, its InvalidSpec condition with nothing in
// moto; for cloud-provider-aws a SyncLoadBalancerFailed event counts as a verdict too.
func (e *env) parityOutcome(p *proc, name string, rejected bool) (string, *lbView) {
	e.t.Helper()
	var verdict string
	var lb *lbView
	e.eventually(p, name+": a verdict", func() (bool, string) {
		svc, err := e.cs.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) == 1 && ing[0].Hostname != "" {
			lb, err = e.aws.byDNS(ing[0].Hostname)
			if err != nil || lb == nil {
				return false, fmt.Sprintf("status names %s, moto: %v", ing[0].Hostname, err)
			}
			verdict = "created"
			return true, ""
		}
		for _, c := range svc.Status.Conditions {
			if rejected && c.Reason == "InvalidSpec" && c.Status == metav1.ConditionFalse {
				verdict = "rejected before any AWS call (InvalidSpec)"
				return true, ""
			}
		}
		evs, err := services.Events(context.Background(), e.cs, e.ns, name)
		if err == nil {
			for _, ev := range evs {
				if ev.Reason == "SyncLoadBalancerFailed" {
					verdict = "failed: " + ev.Message
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no ingress, conditions %+v", svc.Status.Conditions)
	})
	return verdict, lb
}

func (e *env) reread(v *lbView) *lbView {
	e.t.Helper()
	if v == nil {
		return nil
	}
	nv, err := e.aws.byDNS(v.DNS)
	if err != nil || nv == nil {
		e.t.Fatalf("re-reading %s: %v", v.Name, err)
	}
	return nv
}

// defaultsRestored says what of v is not at the documented defaults yet ("" when all are).
func defaultsRestored(v *lbView) string {
	want := map[string]string{"cross_zone": "false", "idle_timeout": "60", "draining": "false/300", "access_log": "false"}
	if v.Kind == kindNLB {
		want = map[string]string{"load_balancing.cross_zone.enabled": "false", "access_logs.s3.enabled": "false"}
	}
	for k, w := range want {
		if v.Attrs[k] != w {
			return fmt.Sprintf("%s=%q, want %q", k, v.Attrs[k], w)
		}
	}
	for _, l := range v.Listeners {
		if got := l.TargetGroupAttrs["proxy_protocol_v2.enabled"]; v.Kind == kindNLB && got != "false" {
			return "proxy_protocol_v2.enabled=" + got
		}
	}
	return ""
}

func nodePorts(e *env, name string) map[int32]bool {
	svc := e.svcs.Get(name)
	out := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		out[p.NodePort] = true
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		out[svc.Spec.HealthCheckNodePort] = true
	}
	return out
}

// parityAspects renders what the tests compare of one load balancer, node ports written as
// <nodePort> (the two Services have their own).
func parityAspects(v *lbView, nodePorts map[int32]bool) [][2]string {
	np := func(s string) string {
		for p := range nodePorts {
			s = strings.ReplaceAll(s, strconv.Itoa(int(p)), "<nodePort>")
		}
		return s
	}
	var out [][2]string
	var ls []string
	for _, k := range keys(v.Listeners) {
		l := v.Listeners[k]
		ls = append(ls, np(fmt.Sprintf("%s->%s:%d", k, l.BackendProtocol, l.BackendPort)))
	}
	out = append(out, [2]string{"listeners", strings.Join(ls, " ")}, [2]string{"scheme", v.Scheme})
	if v.Kind == kindClassic {
		out = append(out,
			[2]string{"health check", np(v.HealthCheck) + " " + v.HealthCheckTiming},
			[2]string{"instances", strconv.Itoa(len(v.Instances))},
			[2]string{"attributes", attrString(v.Attrs, "cross_zone", "idle_timeout", "draining", "access_log")},
			[2]string{"load balancer security groups", strconv.Itoa(len(v.SecurityGroups))},
		)
	} else {
		var hc, targets, tga []string
		for _, k := range keys(v.Listeners) {
			l := v.Listeners[k]
			hc = append(hc, np(l.HealthCheck)+" "+l.HealthCheckTiming)
			targets = append(targets, strconv.Itoa(len(l.Targets)))
			tga = append(tga, attrString(l.TargetGroupAttrs, "proxy_protocol_v2.enabled", "preserve_client_ip.enabled",
				"deregistration_delay.timeout_seconds", "stickiness.enabled"))
		}
		out = append(out,
			[2]string{"health check", strings.Join(hc, " ")},
			[2]string{"targets", strings.Join(targets, " ")},
			[2]string{"attributes", attrString(v.Attrs, "load_balancing.cross_zone.enabled", "access_logs.s3.enabled", "access_logs.s3.bucket")},
			[2]string{"target-group attributes", strings.Join(tga, " ")},
			[2]string{"load balancer security groups", strconv.Itoa(len(v.SecurityGroups))},
		)
	}
	return out
}

func aspectOf(as [][2]string, name string) string {
	for _, a := range as {
		if a[0] == name {
			return a[1]
		}
	}
	return "(none)"
}

func attrString(m map[string]string, ks ...string) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}
