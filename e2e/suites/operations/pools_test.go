package operations

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/providers/baremetal"
)

// TestPoolsForeignAddressReserved (issue 31, item 4): addresses of a Portico pool that Services
// of another class or of no class report in their status (another implementation's, or written
// by anyone with services/status) are never handed to a Portico Service: one reported before
// the controller started and one reported while it runs; a Portico Service gets the next free
// address, and one that asks for a held address is refused with a message naming the holder.
// On 3e563f2 the Portico Service got 198.18.170.1, the address the other class's Service held
// (the provider rebuilt its record from its own Services only), and the request was granted.
func TestPoolsForeignAddressReserved(t *testing.T) {
	e := poolsStart(t)
	e.pool("shared", "198.18.170.0/29") // .1-.6
	other := "example.com/other-lb"
	e.foreign("theirs", &other, "198.18.170.1")
	e.controller(map[string]string{"portico-lb.io/ops": baremetal.Name}, "")
	e.foreign("classless", nil, "198.18.170.2")

	h := e.svcs()
	h.Create(h.LoadBalancer("web", services.WithClass("portico-lb.io/ops")))
	got := h.Wait("web", "one ingress IP", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return "no ingress IP yet"
		}
		return ""
	}).Status.LoadBalancer.Ingress[0].IP
	if got != "198.18.170.3" {
		t.Errorf("the Portico Service got %s, want 198.18.170.3 (.1 held by pools/theirs of class %s, .2 by the class-less pools/classless)", got, other)
	}

	h.Create(h.LoadBalancer("asks", services.WithClass("portico-lb.io/ops"), func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = "198.18.170.2"
	}))
	asks := h.Wait("asks", "condition "+service.ReasonInvalidSpec, func(s *corev1.Service) string {
		c := meta.FindStatusCondition(s.Status.Conditions, service.ConditionReady)
		if c == nil || c.Reason != service.ReasonInvalidSpec {
			return "not refused yet"
		}
		return ""
	})
	c := meta.FindStatusCondition(asks.Status.Conditions, service.ConditionReady)
	if !strings.Contains(c.Message, "pools/classless") {
		t.Errorf("refusal %q does not name the holder pools/classless", c.Message)
	}
	for _, in := range asks.Status.LoadBalancer.Ingress {
		if netip.MustParseAddr(in.IP) == netip.MustParseAddr("198.18.170.2") {
			t.Errorf("asks was given 198.18.170.2, held by pools/classless")
		}
	}
}

// TestPoolsForeignAddressReservedByCCM (issue 31, item 4): portico-ccm with the baremetal
// provider (class-less Services, its own AddressPool and Service informers) does not hand out
// an address a Service of a class it does not serve holds (portico-controller's, say): the
// class-less Service gets the next free one. On 3e563f2 it got the held address.
func TestPoolsForeignAddressReservedByCCM(t *testing.T) {
	var bin string
	built := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		b, err := gobuild.Binary(ctx, "cmd/portico-ccm")
		bin = b
		built <- err
	}()
	e := poolsStart(t)
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.RegisterNode(context.Background(), cluster.NodeSpec{Name: "node-1", InternalIPs: []netip.Addr{netip.MustParseAddr("198.19.0.11")}}); err != nil {
		t.Fatal(err)
	}
	e.pool("shared", "198.18.171.0/29") // .1-.6
	class := "portico-lb.io/ops"
	e.foreign("controllers", &class, "198.18.171.1")

	cloud := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(cloud, []byte("provider: baremetal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ccm := process.StartForTest(t, bin, process.Options{Name: "portico-ccm", Args: []string{
		"--kubeconfig=" + e.c.KubeconfigPath(), "--cloud-provider=portico", "--cloud-config=" + cloud,
		"--controllers=service", "--leader-elect=false", "--configure-cloud-routes=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports.ForTest(t)), "--v=2",
	}})
	h := e.svcs()
	h.Alive = func() error {
		if ccm.Exited() {
			return fmt.Errorf("portico-ccm exited")
		}
		return nil
	}
	h.Create(h.LoadBalancer("classless"))
	got := h.Wait("classless", "one ingress IP", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return "no ingress IP yet"
		}
		return ""
	}).Status.LoadBalancer.Ingress[0].IP
	if got != "198.18.171.2" {
		t.Errorf("the class-less Service got %s from portico-ccm, want 198.18.171.2 (.1 held by pools/controllers of class %s)", got, class)
	}
}
