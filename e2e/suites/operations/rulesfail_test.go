package operations

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// rulesfailForeignChain is the chain of the nat table a user adds on every node, jumping to one
// of the agent's chains: the agent never touches a chain it does not own, so it cannot delete
// the chain that is jumped to, and every sync that tries fails.
const rulesfailForeignChain = "USER-HOLD"

// TestRulesFailedAnnounceNothingNew (issue 31, item 13: the cause of TestBGPFailover's
// "network is unreachable"): while a node's rules cannot be written, its announcer draws no
// traffic for a VIP those rules lack. A user's rule jumps to the per-Service chain of a Local
// Service on every node (iptables mode); the Service is deleted, so every agent's restore
// fails (the chain is still referenced) at every retry, full syncs included. A new Service's
// VIP then arrives: no node answers ARP for it, and the elected node logs that it holds the VIP
// back. Once the user's rule goes, the next sync programs the rules and exactly one node
// answers, with the VIP in its rules. On d6507e1 the elected node answered ARP for the new VIP
// while its rules lacked it (the sync loop ran the announcers after a failed restore with the
// same objects), and a client's packets met a node without a rule for them: a BGP node did the
// same, answering with ICMP net unreachable (TestBGPFailover after TestBGPAnnounce, whose
// Local Service's deletion failed the nftables transaction before item 12's fix).
func TestRulesFailedAnnounceNothingNew(t *testing.T) {
	const oldVIP, vip = "198.18.224.5", "198.18.224.6"
	ctx := context.Background()
	l := announceStart(t, "198.18.224.0/28", "--proxy-mode=iptables")
	h := services.Helper{TB: t, CS: l.CS, Namespace: announceNamespace, Timeout: 60 * time.Second}
	nodes := l.Lab.Nodes()

	// "old": externalTrafficPolicy Local with an endpoint, so every node has its chains.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old-0", Namespace: announceNamespace, Labels: map[string]string{"app": "old"}}}
	if _, err := l.Cluster.CreateReadyPod(ctx, pod, nodes[0].Name, nodes[0].PodCIDR.Addr().Next().Next()); err != nil {
		t.Fatal(err)
	}
	port := func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": "old"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}}
	}
	h.Create(h.LoadBalancer("old", port, func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = oldVIP
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}))
	h.Wait("old", "ingress "+oldVIP, services.HasIngressIPs(netip.MustParseAddr(oldVIP)))
	localChain := regexp.MustCompile(`(?m)^:(PTC-X-[A-Z2-7]+) `)
	chain := ""
	for _, n := range nodes {
		wait.For(t, 60*time.Second, n.Name+"'s rules with old's Local chain", func() error {
			out, err := n.Exec(ctx, "iptables-save", "-t", "nat")
			if err != nil {
				return err
			}
			m := localChain.FindStringSubmatch(string(out))
			if m == nil || !strings.Contains(string(out), oldVIP) {
				return fmt.Errorf("no PTC-X- chain and %s yet", oldVIP)
			}
			chain = m[1]
			return nil
		})
	}

	// The user's rule on every node, then old goes: every agent's syncs fail from now on.
	for _, n := range nodes {
		for _, args := range [][]string{{"-t", "nat", "-N", rulesfailForeignChain}, {"-t", "nat", "-A", rulesfailForeignChain, "-j", chain}} {
			if out, err := n.Exec(ctx, "iptables", args...); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
	}
	if err := l.CS.CoreV1().Services(announceNamespace).Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		wait.For(t, 60*time.Second, n.Name+"'s agent failing to sync old's deletion", func() error {
			if !strings.Contains(l.agents[n.Name].Output(), "Sync failed") {
				return fmt.Errorf("no failed sync in its log")
			}
			return nil
		})
	}

	h.Create(h.LoadBalancer("web", port, func(s *corev1.Service) { s.Annotations["portico-lb.io/loadBalancerIPs"] = vip }))
	h.Wait("web", "ingress "+vip, services.HasIngressIPs(netip.MustParseAddr(vip)))
	rulesLack := func() error {
		for _, n := range nodes {
			out, err := n.Exec(ctx, "iptables-save", "-t", "nat")
			if err != nil {
				return err
			}
			if strings.Contains(string(out), vip) {
				return fmt.Errorf("%s's rules have %s: its sync did not fail", n.Name, vip)
			}
		}
		return nil
	}
	held := ""
	wait.For(t, 60*time.Second, "the elected node holding "+vip+" back (its log), and no node answering ARP for it", func() error {
		if err := rulesLack(); err != nil {
			return wait.Stop(err)
		}
		if who, out := l.arping(vip, 1); len(who) > 0 {
			return wait.Stop(fmt.Errorf("%v answer ARP for %s, which no node's rules have:\n%s", who, vip, out))
		}
		for name, p := range l.agents {
			for _, line := range strings.Split(p.Output(), "\n") {
				if strings.Contains(line, "until its rules are programmed") && strings.Contains(line, vip) {
					held = name
					return nil
				}
			}
		}
		return fmt.Errorf("no agent logged holding %s back", vip)
	})
	if who, out := l.arping(vip, 3); len(who) > 0 {
		t.Fatalf("%v answer ARP for %s, which no node's rules have:\n%s", who, vip, out)
	}
	if err := rulesLack(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s held %s back while its rules failed; no node answered ARP", held, vip)

	// The user's rule goes; a change of web makes the agents sync now rather than at their
	// back-off's end.
	for _, n := range nodes {
		for _, args := range [][]string{{"-t", "nat", "-F", rulesfailForeignChain}, {"-t", "nat", "-X", rulesfailForeignChain}} {
			if out, err := n.Exec(ctx, "iptables", args...); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
	}
	if _, err := l.CS.CoreV1().Services(announceNamespace).Patch(ctx, "web", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 60*time.Second, "exactly "+held+" answering ARP for "+vip+", with it in its rules", func() error {
		who, out := l.arping(vip, 1)
		if len(who) != 1 || who[0] != held {
			return fmt.Errorf("answered by %v:\n%s", who, out)
		}
		for _, n := range nodes {
			if n.Name != held {
				continue
			}
			rules, err := n.Exec(ctx, "iptables-save", "-t", "nat")
			if err != nil {
				return err
			}
			if !strings.Contains(string(rules), vip) {
				return wait.Stop(fmt.Errorf("%s answers ARP for %s, which its rules lack", held, vip))
			}
		}
		return nil
	})
}
