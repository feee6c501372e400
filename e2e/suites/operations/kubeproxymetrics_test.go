package operations_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// TestKubeProxyMetricNames (issue 29 point 4): the agent exports kube-proxy's metric names for
// the measurements kube-proxy makes, beside its own, so kube-proxy's dashboards keep working.
// On a real control plane (with the EndpointSlice controller) and a lab node, portico-agent
// (in each proxy mode) serves /metrics on the node's address; a client scrapes it: every kube-proxy
// name is there from the first sync; then a Service and a ready Pod behind it are created (once
// the clock is a second past the agent's start, so that the slice's
// endpoints.kubernetes.io/last-change-trigger-time, kept to the second, is after it: kube-proxy
// measures only those) and the test waits until
// each kube-proxy series moved: the sync duration histogram, the last sync and last queued
// timestamps, the Service and EndpointSlice change counters, and the network programming
// histogram (trigger time to rules written). Each kube-proxy twin counts what the agent's own
// name counts.
//
// On 9824d1b no kubeproxy_ series exists: the scrape lacks every name.
func TestKubeProxyMetricNames(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.NFTables, prereq.IPTables)
	env := kpMetricsEnv(t)
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) { testKubeProxyMetricNames(t, env, mode) })
	}
}

func testKubeProxyMetricNames(t *testing.T, env *labcluster.Env, mode string) {
	node, client := env.Lab.Nodes()[0], env.Lab.Clients()[0]
	ctx := t.Context()
	ns := "kpmetrics-" + mode
	if err := env.Cluster.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// After the agent stopped: the next mode starts clean.
		if out, err := node.Exec(context.WithoutCancel(ctx), env.Agent, "--cleanup"); err != nil {
			t.Errorf("portico-agent --cleanup: %v\n%s", err, out)
		}
	})
	metrics := netip.AddrPortFrom(node.Addr, 10249)
	agent := node.Run(t, env.Agent, "--kubeconfig="+env.Kubeconfig, "--hostname-override="+node.Name,
		"--proxy-mode="+mode, "--cluster-cidr="+node.PodCIDR.String(), "--iptables-min-sync-period=100ms",
		"--healthz-bind-address=0", "--metrics-bind-address="+metrics.String(), "-v=1")
	logs := func() string { return "agent:\n" + agentExitTail(agent.Output(), 40) }
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := agent.WaitFor(wctx, `"Synced"`); err != nil {
		t.Fatalf("the agent: %v\n%s", err, logs())
	}
	synced := time.Now()

	// Every name, with the series kube-proxy's dashboards read (histograms by their _count).
	moving := []string{
		"kubeproxy_sync_proxy_rules_duration_seconds_count",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total",
		"kubeproxy_network_programming_duration_seconds_count",
	}
	present := append([]string{"kubeproxy_sync_full_proxy_rules_duration_seconds_count",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds_count"}, moving...)
	var before map[string]float64
	wait.For(t, 30*time.Second, "every kube-proxy name on /metrics", func() error {
		var err error
		if before, err = kpMetricsScrape(ctx, client, metrics); err != nil {
			return err
		}
		for _, name := range present {
			if _, ok := before[name]; !ok {
				return fmt.Errorf("no %s on %s/metrics", name, metrics)
			}
		}
		return nil
	}, logs)

	// kube-proxy (and the agent) measure only changes made after they started, and the
	// trigger time is kept to the second: the change comes once the clock is past the
	// agent's start by that much.
	after := synced.Truncate(time.Second).Add(time.Second)
	wait.For(t, 5*time.Second, "the clock past "+after.Format(time.RFC3339), wait.True(func() bool { return time.Now().After(after) }))
	backend := node.AddPod(t, "kpm-"+mode[:4])
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: ns, Labels: map[string]string{"app": "kpm"}}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/echo", Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 8080}}}}
	if _, err := env.Cluster.CreateReadyPod(ctx, pod, node.Name, backend.Addr); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kpm", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "kpm"},
		Ports:    []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
	}}
	if _, err := env.CS.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the Service's EndpointSlice with the pod and a trigger time", func() error {
		slices, err := env.CS.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kpm"})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			v := s.Annotations[corev1.EndpointsLastChangeTriggerTime]
			if tt, err := time.Parse(time.RFC3339Nano, v); err == nil && !tt.Before(after) && len(s.Endpoints) > 0 {
				return nil
			}
		}
		return fmt.Errorf("no slice of kpm with endpoints and a trigger time from %s on yet (%d slices)", after.Format(time.RFC3339), len(slices.Items))
	}, logs)

	var now map[string]float64
	wait.For(t, time.Minute, "every kube-proxy series moved after the change", func() error {
		var err error
		if now, err = kpMetricsScrape(ctx, client, metrics); err != nil {
			return err
		}
		var still []string
		for _, name := range moving {
			if now[name] <= before[name] {
				still = append(still, fmt.Sprintf("%s %v", name, now[name]))
			}
		}
		if len(still) > 0 {
			return fmt.Errorf("not moved: %s", strings.Join(still, ", "))
		}
		return nil
	}, logs)
	// The twins count the same events.
	for _, twin := range [][2]string{
		{"kubeproxy_sync_proxy_rules_service_changes_total", "portico_agent_sync_proxy_rules_service_changes_total"},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", "portico_agent_sync_proxy_rules_endpoint_changes_total"},
		{"kubeproxy_network_programming_duration_seconds_count", "portico_agent_network_programming_duration_seconds_count"},
	} {
		if now[twin[0]] != now[twin[1]] {
			t.Errorf("%s = %v, %s = %v: want the same count", twin[0], now[twin[0]], twin[1], now[twin[1]])
		}
	}
	if v := now["kubeproxy_network_programming_duration_seconds_sum"] / now["kubeproxy_network_programming_duration_seconds_count"]; v <= 0 || v > 60 {
		t.Errorf("mean network programming latency %v s: want a positive time under a minute", v)
	}
}

// kpMetricsEnv is a real control plane and a lab of one node and one client.
func kpMetricsEnv(t *testing.T) *labcluster.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-ops-kpmetrics-", Lab: netlab.Options{Nodes: 1, Clients: 1}})
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// kpMetricsScrape reads addr's /metrics from h: each series name with its samples summed over
// their labels.
func kpMetricsScrape(ctx context.Context, h *netlab.Host, addr netip.AddrPort) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.DialTCP(ctx, addr) }}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s/metrics: %s: %s", addr, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '}'); i >= 0 {
			series, value, ok = line[:i+1], strings.TrimSpace(line[i+1:]), true
		}
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(series, "{")
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		if strings.HasSuffix(name, "_bucket") {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}
