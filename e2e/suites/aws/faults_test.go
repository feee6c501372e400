package aws_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/moto"
)

// TestFaultsBackOffAndConverge puts moto.Proxy between portico-controller and moto and throttles
// and drops a share of its calls (EC2 RequestLimitExceeded, ELB Throttling, closed connections)
// while it creates, changes and deletes an NLB and a Classic ELB: it converges with the right
// status, one load balancer per Service, no duplicates, and nothing left after deletion.
func TestFaultsBackOffAndConverge(t *testing.T) {
	e := newEnv(t, envOptions{})
	px := e.srv.Proxy(t)
	drops := []moto.Rule{
		{Service: moto.ServiceEC2, Action: "DescribeInstances", Fault: moto.Drop, Times: 3},
		{Service: moto.ServiceELBv2, Action: "CreateListener", Fault: moto.Drop, Times: 1},
		{Service: moto.ServiceELB, Action: "CreateLoadBalancer", Fault: moto.Drop, Times: 1},
	}
	for _, d := range drops {
		px.Inject(d)
	}
	px.Inject(moto.Rule{Service: moto.ServiceEC2, Fault: moto.Throttle, Probability: 0.3, Times: 5, Seed: 1})
	px.Inject(moto.Rule{Service: moto.ServiceELBv2, Fault: moto.Throttle, Probability: 0.3, Times: 5, Seed: 2})
	px.Inject(moto.Rule{Service: moto.ServiceELB, Fault: moto.Throttle, Probability: 0.3, Times: 5, Seed: 3})
	px.Inject(moto.Rule{Fault: moto.Drop, Probability: 0.1, Times: 5, Seed: 4})
	p := e.startController(ctlOptions{Endpoint: px.URL})

	uids := map[string]string{}
	for _, kind := range []string{kindNLB, kindClassic} {
		svc := e.create(e.lbService(kind, kind))
		uids[kind] = string(svc.UID)
	}
	all := e.instanceIDs(0, 1, 2)
	for _, kind := range []string{kindNLB, kindClassic} {
		e.waitLB(p, kind, "created through faults", func(s *corev1.Service, lb *lbView) string {
			return expectLB(s, lb, kind, lbWant{scheme: "internet-facing", ports: map[string]int32{"TCP:80": 80}, targets: all})
		})
	}
	// A change and a node added, still through faults.
	for _, kind := range []string{kindNLB, kindClassic} {
		e.update(kind, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "alt", Port: 8080, Protocol: corev1.ProtocolTCP})
		})
	}
	added := e.f.AddNode(t)
	e.addNode(added, nil)
	all = e.instanceIDs(0, 1, 2, 3)
	for _, kind := range []string{kindNLB, kindClassic} {
		e.waitLB(p, kind, "updated through faults", func(s *corev1.Service, lb *lbView) string {
			return expectLB(s, lb, kind, lbWant{scheme: "internet-facing", ports: map[string]int32{"TCP:80": 80, "TCP:8080": 8080}, targets: all})
		})
	}
	inv := e.owned()
	for kind, uid := range uids {
		if n := len(lbsOf(inv, uid)); n != 1 {
			t.Errorf("%s: %d load balancers, want 1:\n%s", kind, n, inv)
		}
	}
	for _, kind := range []string{kindNLB, kindClassic} {
		e.delete(kind)
	}
	for _, kind := range []string{kindNLB, kindClassic} {
		e.waitGone(p, kind)
	}
	e.expectNothingOwned()

	faults := px.Faults()
	t.Logf("faults injected: %d (%s); calls through the proxy: %d", faults.Total(), faults, px.Calls().Total())
	for _, svc := range []string{moto.ServiceEC2, moto.ServiceELBv2, moto.ServiceELB} {
		if faults.Service(svc).Total() == 0 {
			t.Errorf("no fault was injected into %s calls; the test proved nothing for them", svc)
		}
	}
	// The drop rules come first and fault the first N matching calls: every one of them fired
	// when more calls than that went through.
	for _, d := range drops {
		if got := px.Calls().Count(d.Service, d.Action); got <= d.Times {
			t.Errorf("%s:%s went through the proxy %d times; the first %d were to be dropped", d.Service, d.Action, got, d.Times)
		}
	}
}
