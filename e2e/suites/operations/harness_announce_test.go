package operations

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/internal/prereq"
)

// announceNamespace holds the announce tests' Services.
const announceNamespace = "announce"

// announceLab is the fixture of the announce tests, one per test: a lab of three dual-stack
// nodes and a client (labcluster.Start: control plane, portico-controller with the baremetal
// provider for class-less Services), an AddressPool with spec.announce.l2, and portico-agent
// on every node with the l2 announcer, as the l2 suite runs them. The client reaches the pool
// on-link: only ARP tells it where an address is.
type announceLab struct {
	*labcluster.Env
	macs   map[string]net.HardwareAddr // node -> eth0
	agents map[string]*netlab.Process  // node -> its agent
}

// announceStart starts the fixture with pool; agentArgs are added to every agent's arguments.
func announceStart(t *testing.T, pool string, agentArgs ...string) *announceLab {
	t.Helper()
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables, prereq.IPUtilsArping)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env, err := labcluster.Start(ctx, "portico-e2e-ops-announce-", filepath.Join("..", "..", "..", "deploy", "crds"), announceNamespace)
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &announceLab{Env: env, macs: map[string]net.HardwareAddr{}, agents: map[string]*netlab.Process{}}
	for _, n := range env.Lab.Nodes() {
		if err := n.Do(func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err == nil {
				l.macs[n.Name] = ifi.HardwareAddr
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ap := &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.AddressPoolSpec{
		Addresses: []string{pool}, Announce: v1alpha1.Announce{L2: &v1alpha1.L2Announce{}}}}
	if err := env.CL.Create(ctx, ap); err != nil {
		t.Fatalf("creating pool: %v", err)
	}
	if _, err := env.Lab.Clients()[0].Exec(ctx, "ip", "route", "add", pool, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	for _, n := range env.Lab.Nodes() {
		cidrs = append(cidrs, n.PodCIDR.String(), n.PodCIDR6.String())
	}
	for _, n := range env.Lab.Nodes() {
		// The agent's defaults for the classes: class-less Services are Portico's (the
		// controller's --classless-provider=baremetal), no class is.
		p := n.Run(t, env.Agent, append([]string{"--kubeconfig=" + env.Kubeconfig, "--hostname-override=" + n.Name,
			"--iptables-sync-period=30s", "--iptables-min-sync-period=100ms",
			"--healthz-bind-address=0.0.0.0:10256", "--metrics-bind-address=0",
			"--cluster-cidr=" + strings.Join(cidrs, ","),
			"--announce=l2", "--membership", "--membership-rejoin-interval=1s", "-v=1"}, agentArgs...)...)
		l.agents[n.Name] = p
		wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := p.WaitFor(wctx, `"Synced"`)
		wcancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// arping asks the client's LAN with Debian's arping (not Portico's code) who has ip, count
// times, and returns the nodes whose MACs answered.
func (l *announceLab) arping(ip string, count int) ([]string, string) {
	out, _ := l.Lab.Clients()[0].Exec(context.Background(), "arping", "-c", fmt.Sprint(count), "-w", fmt.Sprint(count+1), "-I", "eth0", ip)
	s := strings.ToLower(string(out))
	var who []string
	for n, mac := range l.macs {
		if strings.Contains(s, mac.String()) {
			who = append(who, n)
		}
	}
	return who, s
}
