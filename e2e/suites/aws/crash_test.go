package aws_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/moto"
)

var crashSeed = flag.Uint64("aws.seed", 1, "seed of TestCrashTrials' random kill points")

// crash phases.
const (
	phaseCreate = "create"
	phaseUpdate = "update" // kind change (a replacement) plus a port added
	phaseDelete = "delete"
)

// TestCrashTrials SIGKILLs portico-controller at the Nth write call (N drawn from a seeded RNG)
// of a create, an update (a kind change, which replaces the load balancer, plus a new port) or
// a delete, then restarts it: it converges to the Service's spec with exactly one load balancer
// for the Service and no duplicates, and after the Service is deleted nothing tagged for the
// cluster remains in moto (ownership tags, not moto's errors, are the evidence). -aws.trials
// sets the number of trials (default 10), cycling through kinds and phases; -aws.seed the RNG.
func TestCrashTrials(t *testing.T) {
	e := newEnv(t, envOptions{})
	px := e.srv.Proxy(t)
	c := &crasher{e: e, parent: t, px: px, rng: rand.New(rand.NewPCG(*crashSeed, 7))}
	c.p = e.startController(ctlOptions{Endpoint: px.URL})
	// Upper bounds of N per kind and phase, raised to the writes counted whenever an operation
	// completes without being killed.
	c.bound = map[string]int{}
	for _, k := range []string{kindNLB, kindClassic} {
		c.bound[k+"/"+phaseCreate], c.bound[k+"/"+phaseUpdate], c.bound[k+"/"+phaseDelete] = 8, 14, 4
	}
	kinds := []string{kindNLB, kindClassic}
	phases := []string{phaseCreate, phaseUpdate, phaseDelete}
	killed := 0
	for i := range *trials {
		kind, phase := kinds[i%2], phases[(i/2)%3]
		name := fmt.Sprintf("t%d-%s-%s", i, kind, phase)
		ok := t.Run(name, func(t *testing.T) {
			c.e.t = t
			if c.trial(name, kind, phase) {
				killed++
			}
		})
		c.e.t = e.t
		if !ok {
			break
		}
	}
	t.Logf("%d trials, %d killed mid-operation (seed %d); write bounds %v", *trials, killed, *crashSeed, c.bound)
	if killed*10 < *trials*7 {
		t.Errorf("only %d of %d trials killed the controller; the bounds are too high to test much", killed, *trials)
	}
}

type crasher struct {
	e      *env
	parent testing.TB
	px     *moto.Proxy
	p      *proc
	rng    *rand.Rand
	bound  map[string]int
}

// arm kills the controller at the nth write from now; the returned function disarms and
// reports whether the kill happened and how many writes were seen.
func (c *crasher) arm(n int) func() (bool, int) {
	var mu sync.Mutex
	writes, fired := 0, false
	p := c.p
	c.px.OnCall(func(call moto.Call) {
		if !call.Write() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		writes++
		if writes == n && !fired {
			fired = true
			_ = p.Kill()
		}
	})
	return func() (bool, int) {
		c.px.OnCall(nil)
		mu.Lock()
		defer mu.Unlock()
		return fired, writes
	}
}

// trial runs one kill trial and reports whether the controller was killed.
func (c *crasher) trial(name, kind, phase string) bool {
	e := c.e
	t := e.t
	all := e.instanceIDs(0, 1, 2)
	key := kind + "/" + phase
	n := 1 + c.rng.IntN(c.bound[key])
	other := kindClassic
	if kind == kindClassic {
		other = kindNLB
	}
	created := func(s *corev1.Service, lb *lbView) string {
		return expectLB(s, lb, kind, lbWant{scheme: "internet-facing", ports: map[string]int32{"TCP:80": 80}, targets: all})
	}
	updated := func(s *corev1.Service, lb *lbView) string {
		return expectLB(s, lb, other, lbWant{scheme: "internet-facing", ports: map[string]int32{"TCP:80": 80, "TCP:8080": 8080}, targets: all})
	}
	var disarm func() (bool, int)
	var done func() bool
	if phase == phaseCreate {
		disarm = c.arm(n)
	}
	svc := e.create(e.lbService(name, kind))
	switch phase {
	case phaseCreate:
		done = func() bool { return c.converged(name, created) }
	case phaseUpdate:
		e.waitLB(c.p, name, "created", created)
		disarm = c.arm(n)
		e.update(name, func(s *corev1.Service) {
			if other == kindNLB {
				s.Annotations[annotations.AWSLoadBalancerType] = "nlb"
			} else {
				delete(s.Annotations, annotations.AWSLoadBalancerType)
			}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "alt", Port: 8080, Protocol: corev1.ProtocolTCP})
		})
		done = func() bool {
			return c.converged(name, updated) && len(lbsOf(e.srv.Owned(t, e.cluster), string(svc.UID))) == 1
		}
	case phaseDelete:
		e.waitLB(c.p, name, "created", created)
		disarm = c.arm(n)
		e.delete(name)
		done = func() bool {
			_, err := e.cs.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return c.p.Exited() || done(), nil
	})
	fired, writes := disarm()
	if !fired && c.p.Exited() {
		t.Fatalf("controller exited without being killed:\n%s", c.p.LogTail())
	}
	if fired {
		t.Logf("killed at write %d of %s %s; restarting", n, kind, phase)
		// The new process belongs to the whole test, not to this trial.
		e.t = c.parent
		c.p = e.startController(ctlOptions{Endpoint: c.px.URL})
		e.t = t
	} else {
		t.Logf("%s %s completed with %d writes before write %d", kind, phase, writes, n)
		c.bound[key] = max(writes, 1)
	}

	// Converged after the restart: the Service's spec, one load balancer, no duplicates.
	switch phase {
	case phaseCreate:
		e.waitLB(c.p, name, "converged after restart", created)
	case phaseUpdate:
		e.waitLB(c.p, name, "converged after restart", updated)
	}
	if phase != phaseDelete {
		// A replaced load balancer is deleted by the Ensure after the status names the new one
		// (about a second later): wait for one, then fail on anything else.
		inv := e.owned()
		_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
			inv = e.owned()
			return len(lbsOf(inv, string(svc.UID))) == 1, nil
		})
		if lbs := lbsOf(inv, string(svc.UID)); len(lbs) != 1 {
			t.Errorf("%d load balancers for the Service, want 1:\n%s", len(lbs), inv)
		}
		e.delete(name)
	}
	e.waitGone(c.p, name)
	e.expectNothingOwned()
	return fired
}

// converged reports whether the Service's status names a load balancer moto holds that check
// accepts.
func (c *crasher) converged(name string, check func(*corev1.Service, *lbView) string) bool {
	svc, err := c.e.cs.CoreV1().Services(c.e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || len(svc.Status.LoadBalancer.Ingress) != 1 {
		return false
	}
	lb, err := c.e.aws.byDNS(svc.Status.LoadBalancer.Ingress[0].Hostname)
	return err == nil && lb != nil && check(svc, lb) == ""
}
