package operations_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/portico-lb/portico/controllers/service"
)

// TestOwnersConfigEditKeepsLoadBalancer (issue 31 item 1): the controller restarts with a class
// removed from its configuration. The Service of that class keeps its load balancer (the
// provider sees no Delete), its finalizer and its address, and gets the condition and a Warning
// Event naming the class and what the instance serves; serving the class again resumes it with
// the same address. At 3e563f2 the restart deleted the load balancer (cleanup of every Service
// whose class was not owned).
func TestOwnersConfigEditKeepsLoadBalancer(t *testing.T) {
	e := ownersSetup(t)
	a := e.instance("portico", "198.18.160.0/24")
	a.start("web", "api")
	e.lb("web", "web")
	e.lb("api", "api")
	web, api := e.ready("web"), e.ready("api")

	a.start("api") // the edit: class web removed
	svc := e.notServed("web")
	c := meta.FindStatusCondition(svc.Status.Conditions, service.ConditionReady)
	for _, want := range []string{`"portico-lb.io/web"`, a.instanceName(), `serves "portico-lb.io/api"`, "kept"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q lacks %q", c.Message, want)
		}
	}
	e.svcs.WaitEvent("web", service.EventClassNotServed, `"portico-lb.io/web"`)
	if n := a.deletes(); n != 0 {
		t.Errorf("the provider saw %d Delete calls after the edit", n)
	}
	if !a.has(web) {
		t.Errorf("the provider no longer holds web's load balancer: %v", a.prov.Refs())
	}
	e.unchanged(web, a.instanceName())
	e.unchanged(api, a.instanceName())

	a.start("web", "api") // the edit undone
	e.ready("web")
	e.unchanged(web, a.instanceName())
	if n := a.deletes(); n != 0 {
		t.Errorf("the provider saw %d Delete calls", n)
	}
}

// TestOwnersTwoInstances (issue 31 item 1): two installations with different classes on one
// cluster each provision their own Services; reconfiguring one (its class removed, then the
// other's class added) and restarting the other never touch the other's Service. A Service
// provisioned before holders were recorded (Portico's finalizer only) is adopted by the
// installation serving its class; a class-less Service with the stock finalizer (portico-ccm's,
// the stock controller's) is touched by neither. At 3e563f2 the reconfigured installation
// removed the other's finalizer and status.
func TestOwnersTwoInstances(t *testing.T) {
	e := ownersSetup(t)
	a, b := e.instance("portico-a", "198.18.161.0/24"), e.instance("portico-b", "198.18.162.0/24")
	// Provisioned by a Portico that recorded no holder: its finalizer only.
	e.lb("legacy", "a", func(s *corev1.Service) { s.Finalizers = []string{service.Finalizer} })
	e.svcs.Create(e.svcs.LoadBalancer("ccm", func(s *corev1.Service) { s.Finalizers = []string{service.StockFinalizer} }))
	t.Cleanup(func() { e.svcs.Update("ccm", func(s *corev1.Service) { s.Finalizers = nil }) })
	a.start("a")
	b.start("b")
	e.lb("wa", "a")
	e.lb("wb", "b")
	wa, wb := e.ready("wa"), e.ready("wb")
	e.ready("legacy")
	for name, in := range map[string]*ownersInstance{"wa": a, "wb": b, "legacy": a} {
		if got := ownersHolder(e.svcs.Get(name)); got != in.instanceName() {
			t.Errorf("%s is held by %q, want %q", name, got, in.instanceName())
		}
	}

	// a: its class removed, another added.
	a.start("c")
	e.notServed("wa")
	e.lb("wc", "c")
	e.ready("wc") // a has been through its Services
	e.unchanged(wb, b.instanceName())
	e.unchanged(wa, a.instanceName())
	// a: serving b's class as well; wb stays b's.
	a.start("b", "c")
	e.lb("wc2", "c")
	e.ready("wc2")
	e.unchanged(wb, b.instanceName())
	if _, ok := a.prov.Desired(ownersRef(wb)); ok {
		t.Errorf("instance a ensured b's Service")
	}
	// b restarts.
	b.start("b")
	e.lb("wb2", "b")
	e.ready("wb2")
	e.unchanged(wb, b.instanceName())
	e.unchanged(wa, a.instanceName())

	if na, nb := a.deletes(), b.deletes(); na != 0 || nb != 0 {
		t.Errorf("Delete calls: instance a %d, instance b %d; want none", na, nb)
	}
	if !b.has(wb) || !a.has(wa) {
		t.Errorf("load balancers gone: a holds %v, b holds %v", a.prov.Refs(), b.prov.Refs())
	}
	for _, r := range e.svcs.Reasons("wb") {
		if r == service.EventClassNotServed || r == service.EventDeleting {
			t.Errorf("wb got Event %s", r)
		}
	}
	ccm := e.svcs.Get("ccm")
	if !slices.Equal(ccm.Finalizers, []string{service.StockFinalizer}) || ownersHolder(ccm) != "" ||
		len(ccm.Status.Conditions) != 0 || e.reasons("ccm") != "" {
		t.Errorf("the stock finalizer's Service was touched: finalizers %v, annotations %v, status %+v, Events %s",
			ccm.Finalizers, ccm.Annotations, ccm.Status, e.reasons("ccm"))
	}
}

// TestOwnersDeleteAndTypeChangeStillDelete (issue 31 item 1): what still deletes a load
// balancer: the Service's deletion and its type leaving LoadBalancer, for a Service the
// instance serves and for one it only holds (its class removed; kept until then). At 3e563f2
// the held Service's load balancer went at the restart.
func TestOwnersDeleteAndTypeChangeStillDelete(t *testing.T) {
	e := ownersSetup(t)
	a := e.instance("portico", "198.18.163.0/24")
	a.start("a", "old")
	for _, n := range []string{"del", "retype"} {
		e.lb(n, "a")
	}
	for _, n := range []string{"old-del", "old-retype"} {
		e.lb(n, "old")
	}
	svcs := map[string]*corev1.Service{}
	for _, n := range []string{"del", "retype", "old-del", "old-retype"} {
		svcs[n] = e.ready(n)
	}
	a.start("a") // class old removed: its Services are held, not served
	for _, n := range []string{"old-del", "old-retype"} {
		e.notServed(n)
		if !a.has(svcs[n]) {
			t.Fatalf("%s lost its load balancer at the restart", n)
		}
	}
	for _, n := range []string{"del", "old-del"} {
		e.svcs.Delete(n)
	}
	for _, n := range []string{"retype", "old-retype"} {
		e.svcs.Update(n, ownersToClusterIP)
	}
	for _, n := range []string{"del", "old-del"} {
		e.svcs.WaitGone(n)
	}
	for _, n := range []string{"retype", "old-retype"} {
		e.svcs.Wait(n, "released", func(s *corev1.Service) string {
			if len(s.Finalizers) != 0 || ownersHolder(s) != "" || len(s.Status.LoadBalancer.Ingress) != 0 || len(s.Status.Conditions) != 0 {
				return "finalizer, holder or status left"
			}
			return ""
		})
	}
	for n, svc := range svcs {
		if a.has(svc) {
			t.Errorf("the provider still holds %s's load balancer", n)
		}
	}
	if n := a.deletes(); n != 4 {
		t.Errorf("Delete calls %d, want 4", n)
	}
}

func ownersToClusterIP(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.LoadBalancerClass = nil
	s.Spec.AllocateLoadBalancerNodePorts = nil
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	s.Spec.ExternalTrafficPolicy = ""
}
