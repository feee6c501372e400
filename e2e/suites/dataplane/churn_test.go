package dataplane_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/services"
)

// fullFallbacks is the agent's count of failed syncs, each followed by a full sync.
const fullFallbacks = "portico_agent_sync_proxy_rules_full_fallbacks_total"

// TestServiceChurnWithoutFullSyncFallback (issue 31 item 12): every kind of Service (traffic
// policies Cluster and Local, external and internal; ClientIP affinity; source ranges;
// NodePort, LoadBalancer with a healthCheckNodePort, externalIPs; no endpoints) is created,
// changed and deleted through the API server while both agents of the mode program them; no
// sync fails, so none is replaced by a full sync (the agents' fallback counter stays put and
// their logs have no failed sync). On 3e563f2 the nftables agents' partial transaction deleting
// (or changing) an externalTrafficPolicy: Local port was refused with EBUSY, and the counter
// did not exist.
func TestServiceChurnWithoutFullSyncFallback(t *testing.T) {
	forModes(t, testServiceChurnWithoutFullSyncFallback)
}

func testServiceChurnWithoutFullSyncFallback(t *testing.T) {
	e := newEnv(t)
	nodes := []*netlab.Node{e.node1, e.node2}
	before := map[string]float64{}
	logFrom := map[string]int{}
	for _, n := range nodes {
		v, err := e.metric(n, fullFallbacks)
		if err != nil {
			t.Fatalf("reading the agent's fallback counter: %v", err)
		}
		before[n.Name] = v
		logFrom[n.Name] = len(agentOutput(n))
	}
	e.backend(e.node1, "a", "churn")
	e.backend(e.node2, "b", "churn")
	// Only on node2: node1 has no local endpoint of these.
	e.backend(e.node2, "c", "churn-remote")

	itpLocal := func(s *corev1.Service) {
		p := corev1.ServiceInternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = &p
	}
	affinity := func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }
	ranges := func(s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{e.client.Addr.String() + "/32"}
	}
	nodePort := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }
	externalIP := func(ip string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.ExternalIPs = []string{ip} }
	}
	kinds := []struct {
		name, app string
		vip       string // status.loadBalancer.ingress ("": none)
		create    []func(*corev1.Service)
		change    func(*corev1.Service)
	}{
		{"clusterip", "churn", "", []func(*corev1.Service){withUDP}, affinity},
		{"nodeport", "churn", "", []func(*corev1.Service){nodePort, withUDP}, local},
		{"lb-cluster", "churn", "198.18.128.41", []func(*corev1.Service){loadBalancer}, local},
		{"lb-local", "churn", "198.18.128.42", []func(*corev1.Service){loadBalancer, local},
			func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyCluster, 0
			}},
		{"lb-local-remote", "churn-remote", "198.18.128.43", []func(*corev1.Service){loadBalancer, local, withUDP}, affinity},
		{"lb-local-all", "churn", "198.18.128.44", []func(*corev1.Service){loadBalancer, local, affinity, ranges, externalIP("198.18.130.44")},
			func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = nil }},
		{"lb-ranges", "churn", "198.18.128.45", []func(*corev1.Service){loadBalancer, ranges}, affinity},
		{"itp-local", "churn", "", []func(*corev1.Service){itpLocal}, func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = nil }},
		{"itp-local-remote", "churn-remote", "", []func(*corev1.Service){itpLocal, affinity}, func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityNone }},
		{"affinity", "churn", "", []func(*corev1.Service){affinity}, func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityNone }},
		{"externalips", "churn", "", []func(*corev1.Service){externalIP("198.18.130.45")}, local},
		{"empty", "nobody", "198.18.128.46", []func(*corev1.Service){loadBalancer, local}, affinity},
	}
	h := services.Helper{TB: t, CS: e.cs, Namespace: e.ns}
	pods := map[string]*netlab.Pod{}
	for _, n := range nodes {
		pods[n.Name] = e.pod(n, "client")
	}
	// barrier creates a Service and waits until a pod on each node reaches it: the agents
	// handle changes in order, so every change before it has been programmed (or failed).
	barrier := func(name string) {
		t.Helper()
		svc := e.service(name, "churn")
		for _, n := range nodes {
			e.reach(&pods[n.Name].Host, "tcp", addrPort(clusterIP(svc), 80))
		}
	}

	for _, k := range kinds {
		svc := e.service(k.name, k.app, k.create...)
		if k.vip != "" {
			e.setIngress(svc, netip.MustParseAddr(k.vip), e.node1)
		}
	}
	barrier("after-create")
	// Served as the kind says: a sample, so the churn is of rules that work.
	e.reach(e.client, "tcp", netip.AddrPortFrom(netip.MustParseAddr("198.18.128.42"), 80))
	e.reach(e.client, "tcp", netip.AddrPortFrom(netip.MustParseAddr("198.18.128.44"), 80))

	for _, k := range kinds {
		h.Update(k.name, k.change)
	}
	// More endpoints for every kind: each port's balancing changes too.
	e.backend(e.node1, "d", "churn")
	e.backend(e.node1, "e", "churn-remote")
	barrier("after-change")

	for _, k := range kinds {
		if err := e.cs.CoreV1().Services(e.ns).Delete(e.ctx, k.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	barrier("after-delete")

	for _, n := range nodes {
		v, err := e.metric(n, fullFallbacks)
		if err != nil {
			t.Fatal(err)
		}
		if v != before[n.Name] {
			t.Errorf("%s: %s went from %v to %v: syncs failed and full syncs replaced them", n.Name, fullFallbacks, before[n.Name], v)
		}
		out := agentOutput(n)
		for _, line := range strings.Split(out[min(logFrom[n.Name], len(out)):], "\n") {
			if strings.Contains(line, "Sync failed") {
				t.Errorf("%s: %s", n.Name, line)
			}
		}
	}
	// The deleted Services' addresses are no longer served.
	for _, k := range kinds {
		if k.vip == "" || k.app == "nobody" {
			continue
		}
		dst := netip.AddrPortFrom(netip.MustParseAddr(k.vip), 80)
		e.eventually(fmt.Sprintf("the deleted %s's %s not served", k.name, dst), 30*time.Second, func() error {
			if r, err := e.request(e.client, "tcp", dst); err == nil {
				return fmt.Errorf("answered by %s", r.Server)
			}
			return nil
		})
	}
}

// agentOutput is the output so far of the shared agent on node.
func agentOutput(node *netlab.Node) string {
	shared.mu.Lock()
	p := shared.agents[node.Name]
	shared.mu.Unlock()
	if p == nil {
		return ""
	}
	return p.Output()
}
