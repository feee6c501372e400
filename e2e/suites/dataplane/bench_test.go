package dataplane_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// scaleEnv enables the 10,000-Service size (minutes of object creation and kube-proxy syncs).
const scaleEnv = "PORTICO_BENCH_SCALE"

// agentEnv names another portico-agent binary to measure instead of the one built from this
// source with -tags portico_nobgp, which is the binary the chart runs unless agent.announce has
// bgp (the image's portico-agent; e2e/framework/images). "bgp" measures the default build
// (with GoBGP: the image's portico-agent-bgp, which the chart runs with bgp).
const agentEnv = "PORTICO_BENCH_AGENT"

// onlyEnv limits a run to some proxies, while iterating on one (a comma-separated list of
// portico, portico-nft, kube-proxy, kube-proxy-nft); reported figures come from runs of all four.
const onlyEnv = "PORTICO_BENCH_ONLY"

// limitEnv overrides how long each proxy may take for its first sync (10m; 30m at 10,000
// Services); a proxy stopped at the limit is reported as taking at least that long.
const limitEnv = "PORTICO_BENCH_LIMIT"

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
	rssMB         float64
	mem           memBreakdown
	timedOut      bool
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

func benchSync(b *testing.B, services int) {
	setup(b)
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%d", services)
	if err := shared.cluster.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	slices := createBenchObjects(b, ns, services, 10)
	b.Logf("created %d Services and EndpointSlices in %s", services, time.Since(start).Round(time.Millisecond))
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
		return measure(b, node, prefix, limit, ns, slices, bin, args...)
	}
	b.ResetTimer()
	portico := run("portico", nodes[2], "portico_agent_", agent,
		agentArgs(nodes[2].Name, "--iptables-sync-period=1h", "--iptables-min-sync-period=0")...)
	porticoNFT := run("portico-nft", nodes[6], "portico_agent_", agent,
		agentArgs(nodes[6].Name, "--proxy-mode=nftables", "--iptables-sync-period=1h", "--iptables-min-sync-period=0")...)
	kubeProxy := run("kube-proxy", nodes[3], "kubeproxy_", bins.KubeProxy, kubeProxyArgs(nodes[3], "iptables")...)
	kubeProxyNFT := run("kube-proxy-nft", nodes[7], "kubeproxy_", bins.KubeProxy, kubeProxyArgs(nodes[7], "nftables")...)
	b.StopTimer()

	if len(only) == 0 {
		report(b, "", portico, kubeProxy)
		report(b, "-nft", porticoNFT, kubeProxyNFT)
	}
	b.Logf("%d x 10: first full sync / one-endpoint change / RSS\n"+
		"  kube-proxy iptables  %8s %10s %6.1f MB\n  kube-proxy nftables  %8s %10s %6.1f MB\n"+
		"  portico iptables     %8s %10s %6.1f MB\n  portico nftables     %8s %10s %6.1f MB", services,
		kubeProxy.full.Round(time.Millisecond), kubeProxy.partial.Round(10*time.Microsecond), kubeProxy.rssMB,
		kubeProxyNFT.full.Round(time.Millisecond), kubeProxyNFT.partial.Round(10*time.Microsecond), kubeProxyNFT.rssMB,
		portico.full.Round(time.Millisecond), portico.partial.Round(10*time.Microsecond), portico.rssMB,
		porticoNFT.full.Round(time.Millisecond), porticoNFT.partial.Round(10*time.Microsecond), porticoNFT.rssMB)
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
func measure(b *testing.B, node *netlab.Node, prefix string, limit time.Duration, ns string, epSlices []*discoveryv1.EndpointSlice, bin string, args ...string) syncFigures {
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
			break
		}
		if time.Now().After(deadline) {
			f.full, f.timedOut = time.Since(began), true
			f.rssMB = rssMB(p.Pid())
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
	for range oneEndpointChanges {
		m = scrape()
		count, sum := m["sync_partial_proxy_rules_duration_seconds_count"], m["sync_partial_proxy_rules_duration_seconds_sum"]
		changeOneEndpoint(b, ns, epSlices)
		for time.Now().Before(deadline) {
			m = scrape()
			if n := m["sync_partial_proxy_rules_duration_seconds_count"]; n > count {
				partials = append(partials, time.Duration((m["sync_partial_proxy_rules_duration_seconds_sum"]-sum)/(n-count)*float64(time.Second)))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(partials) > 0 {
		slices.Sort(partials)
		f.partial = partials[len(partials)/2]
		b.Logf("%s: one-endpoint syncs %v", node.Name, partials)
	}
	f.rssMB = rssMB(p.Pid())
	f.mem = readMem(node, p.Pid(), bin)
	b.Logf("%s: full sync %s, one-endpoint sync %s, RSS %.1f MB: %s; load average %s at the start, %s at the end", node.Name, f.full.Round(time.Millisecond), f.partial.Round(10*time.Microsecond), f.rssMB, f.mem, load, loadAverage())
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
	out := make([]*discoveryv1.EndpointSlice, n)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := createBenchService(ctx, ns, i, eps, out); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
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

func createBenchService(ctx context.Context, ns string, i, eps int, out []*discoveryv1.EndpointSlice) error {
	name := fmt.Sprintf("s%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		}},
	}
	if _, err := shared.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
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
	created, err := shared.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating endpoint slice %s: %w", name, err)
	}
	out[i] = created
	return nil
}

// deleteBenchObjects removes the benchmark's Services and slices so later benchmarks and tests
// in the same process do not program them.
func deleteBenchObjects(b *testing.B, ns string) {
	ctx := context.Background()
	_ = shared.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := shared.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && len(l.Items) == 0 {
			return
		}
		time.Sleep(time.Second)
	}
	b.Logf("namespace %s still has Services after 10 minutes", ns)
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
