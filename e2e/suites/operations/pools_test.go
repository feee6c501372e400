package operations

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/portico-lb/portico/controllers/service"
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
