package dataplane_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	k8swait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// scaleEnv enables the 10,000-Service size (minutes of object creation and kube-proxy syncs).
const scaleEnv = "PORTICO_BENCH_SCALE"

// agentEnv names another portico-agent binary to measure instead of the one built from this
// source with -tags portico_nobgp, which is the binary the chart runs unless agent.announce has
// bgp (the image's portico-agent; internal/images). "bgp" measures the default build
// (with GoBGP: the image's portico-agent-bgp, which the chart runs with bgp).
const agentEnv = "PORTICO_BENCH_AGENT"

// onlyEnv limits a run to some proxies, while iterating on one (a comma-separated list of
// portico, portico-nft, kube-proxy, kube-proxy-nft); reported figures come from runs of all four.
const onlyEnv = "PORTICO_BENCH_ONLY"

// limitEnv overrides how long each proxy may take for its first sync, and for each sync after a
// one-endpoint change (10m; 30m at 10,000 Services); a proxy stopped at the limit is reported as
// taking at least that long.
const limitEnv = "PORTICO_BENCH_LIMIT"

// logEnv names a file the benchmark appends its progress and each proxy's figures to, line by
// line as they are measured. The figures are also written to stderr at once (testing buffers
// b.Logf of a benchmark until it ends, without -v), so a run that is interrupted or times out
// keeps what it measured.
const logEnv = "PORTICO_BENCH_LOG"

// BenchmarkSync compares portico-agent with kube-proxy v1.36.3, each in iptables and in
// nftables mode, on the same objects: Services with 10 endpoints each, ClusterIP only. Each
// proxy runs alone in its own node namespace (portico-agent on node3 and node7, kube-proxy on
// node4 and node8), one after the other, and reports, from its own metrics, the duration of its
// first (full) sync, the median duration of the syncs after each of 5 one-endpoint changes, and
// its RSS after them. Ratios are portico / kube-proxy in the same mode.
func BenchmarkSync(b *testing.B) {
	sizes := []int{1000}
	if os.Getenv(scaleEnv) != "" {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchSync(b, n) })
	}
}

type syncFigures struct {
	full, partial time.Duration
	changes       []time.Duration // each one-endpoint change's sync, in order
	rssMB         float64
	mem           memBreakdown
	timedOut      bool
	load          string // load averages at the start and end of the measurement
}

func (f syncFigures) String() string {
	if f.timedOut {
		return fmt.Sprintf("first full sync not done after %s (RSS %.1f MB then)", f.full.Round(time.Second), f.rssMB)
	}
	changes := make([]string, len(f.changes))
	for i, d := range f.changes {
		changes[i] = d.Round(10 * time.Microsecond).String()
	}
	return fmt.Sprintf("first full sync %s, one-endpoint change %s (median of %s), RSS %.1f MB: %s; load average %s",
		f.full.Round(time.Millisecond), f.partial.Round(10*time.Microsecond), strings.Join(changes, " "), f.rssMB, f.mem, f.load)
}

// memBreakdown is where a proxy's RSS lies: anonymous memory (heap, stacks, runtime) against
// file-backed pages (the binary's text and read-only data, mapped by the kernel in fault-around
// windows, so roughly in proportion to the binary's size), and the Go heap as the runtime sees it.
type memBreakdown struct {
	anonMB, fileMB     float64 // RssAnon, RssFile of /proc/PID/status
	heapInuseMB        float64 // go_memstats_heap_inuse_bytes
	heapAllocMB        float64 // go_memstats_heap_alloc_bytes (live and not yet collected)
	heapReleasedMB     float64 // go_memstats_heap_released_bytes
	stackMB, goSysMB   float64 // go_memstats_stack_inuse_bytes, go_memstats_sys_bytes
	binaryMB           float64 // size of the executable file
	nextGCMB, gcCycles float64 // go_memstats_next_gc_bytes, go_gc_duration_seconds_count
	cpuSeconds         float64 // process_cpu_seconds_total: CPU used since the start
}

func (m memBreakdown) String() string {
	return fmt.Sprintf("anon %.1f MB, file %.1f MB (binary %.1f MB); Go heap in use %.1f MB (allocated %.1f, released %.1f, next GC at %.1f), stacks %.1f MB, runtime sys %.1f MB, %v GCs, %.2f s CPU",
		m.anonMB, m.fileMB, m.binaryMB, m.heapInuseMB, m.heapAllocMB, m.heapReleasedMB, m.nextGCMB, m.stackMB, m.goSysMB, m.gcCycles, m.cpuSeconds)
}

// readMem reads pid's RSS split and, from the proxy's own /metrics, its Go memory statistics.
func readMem(node *netlab.Node, pid int, bin string) memBreakdown {
	var m memBreakdown
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			switch k {
			case "RssAnon":
				m.anonMB = kb / 1024
			case "RssFile":
				m.fileMB = kb / 1024
			}
		}
	}
	if st, err := os.Stat(bin); err == nil {
		m.binaryMB = float64(st.Size()) / (1 << 20)
	}
	g := scrapeMetrics(node, "go_")
	mb := func(k string) float64 { return g[k] / (1 << 20) }
	m.heapInuseMB, m.heapAllocMB, m.heapReleasedMB = mb("memstats_heap_inuse_bytes"), mb("memstats_heap_alloc_bytes"), mb("memstats_heap_released_bytes")
	m.stackMB, m.goSysMB, m.nextGCMB = mb("memstats_stack_inuse_bytes"), mb("memstats_sys_bytes"), mb("memstats_next_gc_bytes")
	m.gcCycles = g["gc_duration_seconds_count"]
	m.cpuSeconds = scrapeMetrics(node, "process_")["cpu_seconds_total"]
	return m
}

// progress logs a line of the benchmark and writes it out at once: to stderr (unless -v, where
// b.Logf already streams) and to the file named by logEnv, with the wall-clock time.
func progress(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	line := fmt.Sprintf("%s %s: %s\n", time.Now().UTC().Format(time.TimeOnly), b.Name(), fmt.Sprintf(format, args...))
	if !testing.Verbose() {
		fmt.Fprint(os.Stderr, line)
	}
	if path := os.Getenv(logEnv); path != "" {
		if err := appendLine(path, line); err != nil {
			b.Logf("writing %s: %v", path, err)
		}
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func benchSync(b *testing.B, services int) {
	setup(b)
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%d", services)
	if err := shared.cluster.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	progress(b, "creating %d Services and EndpointSlices; load average %s", services, loadAverage())
	cpu := controlPlaneCPU()
	slices := createBenchObjects(b, ns, services, 10)
	progress(b, "created %d Services and EndpointSlices in %s, using %s; load average %s", services, time.Since(start).Round(time.Millisecond), cpuSince(cpu), loadAverage())
	defer deleteBenchObjects(b, ns)

	limit := 10 * time.Minute
	if services > 1000 {
		limit = 30 * time.Minute
	}
	if d, err := time.ParseDuration(os.Getenv(limitEnv)); err == nil {
		limit = d
	}
	nodes := shared.lab.Nodes()
	bins, err := k8sbin.Ensure(ctx, k8sbin.Options{})
	if err != nil {
		b.Fatal(err)
	}
	kubeProxyArgs := func(node *netlab.Node, mode string) []string {
		return []string{"--kubeconfig=" + shared.kubecfg, "--hostname-override=" + node.Name, "--proxy-mode=" + mode,
			"--metrics-bind-address=0.0.0.0:10249", "--healthz-bind-address=0.0.0.0:10256",
			"--iptables-sync-period=1h", "--iptables-min-sync-period=0s", "--conntrack-max-per-core=0", "--v=1"}
	}
	agent, agentKind := "", "the image's portico-agent: -tags portico_nobgp, as the chart runs it without bgp"
	switch a := os.Getenv(agentEnv); a {
	case "":
		if agent, err = gobuild.BinaryTags(ctx, "cmd/portico-agent", "portico_nobgp"); err != nil {
			b.Fatal(err)
		}
	case "bgp":
		agent, agentKind = shared.agent, "the image's portico-agent-bgp: with GoBGP, as the chart runs it with bgp"
	default:
		agent, agentKind = a, "given by "+agentEnv
	}
	b.Logf("measuring portico-agent %s (%s)", agent, agentKind)
	only := map[string]bool{}
	for _, c := range strings.Split(os.Getenv(onlyEnv), ",") {
		if c != "" {
			only[c] = true
		}
	}
	run := func(column string, node *netlab.Node, prefix, bin string, args ...string) syncFigures {
		if len(only) > 0 && !only[column] {
			return syncFigures{}
		}
		progress(b, "%s on %s: starting; load average %s", column, node.Name, loadAverage())
		f := measure(b, column, node, prefix, limit, ns, slices, bin, args...)
		progress(b, "%s on %s: %s", column, node.Name, f)
		return f
	}
	b.ResetTimer()
	// The nftables pair first: the targets are about them, and a run cut short keeps them.
	porticoNFT := run("portico-nft", nodes[6], "portico_agent_", agent,
		agentArgs(nodes[6].Name, "--proxy-mode=nftables", "--iptables-sync-period=1h", "--iptables-min-sync-period=0")...)
	kubeProxyNFT := run("kube-proxy-nft", nodes[7], "kubeproxy_", bins.KubeProxy, kubeProxyArgs(nodes[7], "nftables")...)
	portico := run("portico", nodes[2], "portico_agent_", agent,
		agentArgs(nodes[2].Name, "--iptables-sync-period=1h", "--iptables-min-sync-period=0")...)
	kubeProxy := run("kube-proxy", nodes[3], "kubeproxy_", bins.KubeProxy, kubeProxyArgs(nodes[3], "iptables")...)
	b.StopTimer()

	if len(only) == 0 {
		report(b, "", portico, kubeProxy)
		report(b, "-nft", porticoNFT, kubeProxyNFT)
	}
	progress(b, "%d x 10: first full sync / one-endpoint change / RSS\n"+
		"  kube-proxy iptables  %s\n  kube-proxy nftables  %s\n  portico iptables     %s\n  portico nftables     %s",
		services, kubeProxy.row(), kubeProxyNFT.row(), portico.row(), porticoNFT.row())
}

// row is a column's line of the summary table: a first full sync not done within the limit
// shows as "> limit", with no change measured ("-").
func (f syncFigures) row() string {
	if f.timedOut {
		return fmt.Sprintf("%8s %10s %6.1f MB", "> "+f.full.Round(time.Second).String(), "-", f.rssMB)
	}
	return fmt.Sprintf("%8s %10s %6.1f MB", f.full.Round(time.Millisecond), f.partial.Round(10*time.Microsecond), f.rssMB)
}

// report reports one mode's figures of portico-agent and kube-proxy (mode: "" for iptables,
// "-nft" for nftables) and their ratios.
func report(b *testing.B, mode string, portico, kubeProxy syncFigures) {
	b.ReportMetric(portico.full.Seconds(), "portico"+mode+"-full-s")
	b.ReportMetric(kubeProxy.full.Seconds(), "kube-proxy"+mode+"-full-s")
	b.ReportMetric(portico.full.Seconds()/kubeProxy.full.Seconds(), "full"+mode+"-ratio")
	b.ReportMetric(float64(portico.partial.Microseconds())/1000, "portico"+mode+"-1ep-ms")
	b.ReportMetric(float64(kubeProxy.partial.Microseconds())/1000, "kube-proxy"+mode+"-1ep-ms")
	if kubeProxy.partial > 0 {
		b.ReportMetric(float64(portico.partial)/float64(kubeProxy.partial), "1ep"+mode+"-ratio")
	}
	b.ReportMetric(portico.rssMB, "portico"+mode+"-rss-MB")
	b.ReportMetric(kubeProxy.rssMB, "kube-proxy"+mode+"-rss-MB")
	b.ReportMetric(portico.rssMB/kubeProxy.rssMB, "rss"+mode+"-ratio")
	if kubeProxy.timedOut {
		b.ReportMetric(1, "kube-proxy"+mode+"-timed-out")
		b.Logf("kube-proxy%s did not finish its first sync within its limit: its figures are lower bounds", mode)
	}
}

// measure runs one proxy in node until its first full sync, changes one endpoint, waits for
// the following sync, reads the proxy's RSS and stops it.
func measure(b *testing.B, column string, node *netlab.Node, prefix string, limit time.Duration, ns string, epSlices []*discoveryv1.EndpointSlice, bin string, args ...string) syncFigures {
	b.Helper()
	load := loadAverage()
	p, err := node.Start(bin, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	var f syncFigures
	scrape := func() map[string]float64 { return scrapeMetrics(node, prefix) }
	deadline := time.Now().Add(limit)
	began := time.Now()
	var m map[string]float64
	for {
		m = scrape()
		if m["sync_full_proxy_rules_duration_seconds_count"] >= 1 {
			f.full = time.Duration(m["sync_full_proxy_rules_duration_seconds_sum"] * float64(time.Second))
			progress(b, "%s on %s: first full sync %s (%s after the start); load average %s", column, node.Name, f.full.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), loadAverage())
			break
		}
		if time.Now().After(deadline) {
			f.full, f.timedOut = time.Since(began), true
			f.rssMB = rssMB(p.Pid())
			progress(b, "%s on %s: first full sync not done after %s, RSS %.1f MB; load average %s", column, node.Name, limit, f.rssMB, loadAverage())
			return f
		}
		select {
		case <-p.Done():
			b.Fatalf("%s exited: %s", bin, tail(p.Output()))
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Let the initial sync burst settle, then change one endpoint of one Service, waiting for
	// the sync after each change; the figure is the median of oneEndpointChanges.
	time.Sleep(2 * time.Second)
	var partials []time.Duration
	for i := range oneEndpointChanges {
		m = scrape()
		count, sum := m["sync_partial_proxy_rules_duration_seconds_count"], m["sync_partial_proxy_rules_duration_seconds_sum"]
		changeOneEndpoint(b, ns, epSlices)
		changed := time.Now()
		synced := false
		// Each change has the limit to be synced in (a slow proxy's last changes are not cut
		// short by the time its first sync took).
		for !synced && time.Since(changed) < limit {
			m = scrape()
			if n := m["sync_partial_proxy_rules_duration_seconds_count"]; n > count {
				d := time.Duration((m["sync_partial_proxy_rules_duration_seconds_sum"] - sum) / (n - count) * float64(time.Second))
				partials = append(partials, d)
				progress(b, "%s on %s: one-endpoint change %d synced in %s (%v syncs); load average %s", column, node.Name, i+1, d.Round(10*time.Microsecond), n-count, loadAverage())
				synced = true
				continue
			}
			select {
			case <-p.Done():
				b.Fatalf("%s exited: %s", bin, tail(p.Output()))
			case <-time.After(100 * time.Millisecond):
			}
		}
		if !synced {
			progress(b, "%s on %s: one-endpoint change %d not synced after %s", column, node.Name, i+1, limit)
		}
	}
	if len(partials) > 0 {
		f.changes = slices.Clone(partials)
		slices.Sort(partials)
		f.partial = partials[len(partials)/2]
	}
	f.rssMB = rssMB(p.Pid())
	f.mem = readMem(node, p.Pid(), bin)
	f.load = load + " at the start, " + loadAverage() + " at the end"
	return f
}

// oneEndpointChanges is how many one-endpoint changes each proxy syncs (the median is reported).
const oneEndpointChanges = 5

var changeCounter struct {
	sync.Mutex
	n int
}

// changeOneEndpoint moves the last endpoint of the first slice to a new address.
func changeOneEndpoint(b *testing.B, ns string, slices []*discoveryv1.EndpointSlice) {
	b.Helper()
	changeCounter.Lock()
	changeCounter.n++
	n := changeCounter.n
	changeCounter.Unlock()
	ctx := context.Background()
	s, err := shared.cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, slices[0].Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s.Endpoints[len(s.Endpoints)-1].Addresses = []string{fmt.Sprintf("198.19.255.%d", n%250+1)}
	if _, err := shared.cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// createBenchObjects creates n selector-less ClusterIP Services with one TCP port and one
// EndpointSlice of eps endpoints each (on a node that does not exist: all remote).
func createBenchObjects(b *testing.B, ns string, n, eps int) []*discoveryv1.EndpointSlice {
	b.Helper()
	ctx := context.Background()
	// Protobuf rather than the clientset's JSON: the API server spends less CPU decoding and
	// encoding each object (the objects are the same).
	cfg := shared.cluster.Config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]*discoveryv1.EndpointSlice, n)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	work := make(chan int)
	var done atomic.Int64
	start := time.Now()
	for range createWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := createBenchService(ctx, cs, ns, i, eps, out); err != nil {
					select {
					case errc <- err:
					default:
					}
					continue
				}
				if d := done.Add(1); d%1000 == 0 && int(d) < n {
					progress(b, "created %d of %d in %s; load average %s", d, n, time.Since(start).Round(time.Second), loadAverage())
				}
			}
		}()
	}
	for i := range n {
		if len(errc) > 0 {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	return out
}

// createWorkers is how many Services (each with its EndpointSlice) are created at once. More do
// not help: object creation is bound by the control plane's CPU (about 21 ms per Service and
// slice: 1,000 of them took the API server 13.6 s, etcd 3.9 s, the controller manager 1.5 s and
// this process 1.6 s), and on a loaded machine 32 requests at once made Service creates run past
// the API server's 60 s request timeout.
const createWorkers = 8

// createRetryPause is the pause before a create is tried again.
var createRetryPause = 5 * time.Second

// createRetrying runs create, again after an API server timeout or overload, every
// createRetryPause for up to an hour (retry.OnError; the object may then exist already, which
// counts as created). On a machine where the control plane gets a small share of the CPU (nice
// 19 beside a CI run, load average 40-85), creates ran past the API server's 60 s request
// timeout several times in a row.
func createRetrying(ctx context.Context, create func() error) error {
	tries := 0
	backoff := k8swait.Backoff{Duration: createRetryPause, Factor: 1, Steps: int(time.Hour / createRetryPause)}
	return retry.OnError(backoff, func(err error) bool {
		return ctx.Err() == nil && (apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			errors.Is(err, context.DeadlineExceeded) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err))
	}, func() error {
		tries++
		if err := create(); tries == 1 || !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil // a retry found what the timed-out request created
	})
}

func createBenchService(ctx context.Context, cs kubernetes.Interface, ns string, i, eps int, out []*discoveryv1.EndpointSlice) error {
	name := fmt.Sprintf("s%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		}},
	}
	if err := createRetrying(ctx, func() error {
		_, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating service %s: %w", name, err)
	}
	port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
	node := "elsewhere"
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "portico-bench",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for j := range eps {
		// Addresses only appear in rules; nothing is sent to them.
		k := i*eps + j
		a := netip.AddrFrom4([4]byte{198, 19, byte(128 + k/250%127), byte(k%250 + 1)})
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{a.String()}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	var created *discoveryv1.EndpointSlice
	if err := createRetrying(ctx, func() error {
		c, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
		if err == nil {
			created = c
		}
		return err
	}); err != nil {
		return fmt.Errorf("creating endpoint slice %s: %w", name, err)
	}
	if created == nil { // created by a request that timed out
		var err error
		if created, err = cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading endpoint slice %s: %w", name, err)
		}
	}
	out[i] = created
	return nil
}

// deleteBenchObjects removes the benchmark's Services and slices so later benchmarks and tests
// in the same process do not program them.
func deleteBenchObjects(b *testing.B, ns string) {
	ctx := context.Background()
	start := time.Now()
	_ = shared.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := shared.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) == 0 {
			progress(b, "namespace %s emptied in %s", ns, time.Since(start).Round(time.Second))
			return
		}
		time.Sleep(time.Second)
	}
	progress(b, "namespace %s still has Services after 10 minutes", ns)
}

// scrapeMetrics reads prefix-ed metrics from the proxy's /metrics on port 10249 inside node.
func scrapeMetrics(node *netlab.Node, prefix string) map[string]float64 {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return node.DialTCP(ctx, netip.MustParseAddrPort(addr))
		},
	}}
	resp, err := client.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := strings.TrimPrefix(line[:i], prefix)
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j] // labelled series (e.g. per IP family) are summed
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// loadAverage is the machine's 1, 5 and 15 minute load averages (the figures depend on what
// else runs).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// controlPlaneCPU is the CPU seconds used so far by each control-plane process and by this one.
func controlPlaneCPU() map[string]float64 {
	pids := shared.cluster.PIDs()
	pids["benchmark"] = os.Getpid()
	out := map[string]float64{}
	for name, pid := range pids {
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue
		}
		if st, err := p.Stat(); err == nil {
			out[name] = st.CPUTime()
		}
	}
	return out
}

// cpuSince describes the CPU seconds each process used since before.
func cpuSince(before map[string]float64) string {
	var parts []string
	for name, s := range controlPlaneCPU() {
		parts = append(parts, fmt.Sprintf("%s %.1f s", name, s-before[name]))
	}
	slices.Sort(parts)
	return "CPU " + strings.Join(parts, ", ")
}

// rssMB reads VmRSS of pid.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
