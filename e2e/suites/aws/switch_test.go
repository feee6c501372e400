package aws_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/moto"
)

// TestAdoptCloudProviderAWS: cloud-provider-aws creates a Classic ELB and an NLB for two
// class-less Services and stops; portico-controller (--classless-provider=aws) starts and adopts
// both in place (adoptCloudProviderAWS says what is proven).
func TestAdoptCloudProviderAWS(t *testing.T) {
	adoptCloudProviderAWS(t, func(e *env, endpoint string) *proc {
		return e.startController(ctlOptions{Endpoint: endpoint, Classless: true})
	})
}

// TestAdoptCloudProviderAWSWithCCM is the same switch to portico-ccm: the stock
// cloud-controller-manager's service controller with Portico's AWS provider takes over what
// cloud-provider-aws's made.
func TestAdoptCloudProviderAWSWithCCM(t *testing.T) {
	adoptCloudProviderAWS(t, func(e *env, endpoint string) *proc {
		return e.startCCM(endpoint)
	})
}

// adoptCloudProviderAWS: cloud-provider-aws creates a Classic ELB and an NLB for two class-less
// Services and stops; start(e, endpoint) starts Portico (serving class-less Services against
// endpoint), which adopts both in place: same name, same DNS name, Portico's ownership tags,
// converged as its own (the NLB's listener moved to Portico's target group), without a single
// CreateLoadBalancer or DeleteLoadBalancer call (moto's recorder) and without the Services'
// status changing (polled throughout). Deleting the Services then deletes the adopted load
// balancers.
func adoptCloudProviderAWS(t *testing.T, start func(e *env, endpoint string) *proc) {
	e, px, cpa := withCloudProviderAWS(t)
	p := &proc{Process: cpa}
	names := map[string]string{"adopt-classic": kindClassic, "adopt-nlb": kindNLB}
	before := map[string]string{}
	for name, kind := range names {
		e.create(e.svcs.LoadBalancer(name, func(s *corev1.Service) {
			if kind == kindNLB {
				s.Annotations[annotations.AWSLoadBalancerType] = "nlb"
			}
		}))
	}
	for name := range names {
		svc, lb := e.waitLB(p, name, "created by cloud-provider-aws", nil)
		if !strings.HasPrefix(lb.Name, "a") || len(lb.Name) != 32 {
			t.Fatalf("%s: cloud-provider-aws named its load balancer %q", name, lb.Name)
		}
		before[name] = svc.Status.LoadBalancer.Ingress[0].Hostname
	}
	if err := cpa.Stop(30 * time.Second); err != nil {
		t.Logf("stopping cloud-provider-aws: %v", err)
	}

	e.srv.Record(t)
	watches := map[string]*statusWatch{}
	for name := range names {
		watches[name] = watchStatus(e, name)
	}
	portico := start(e, px.URL)
	for name, kind := range names {
		svc := e.svcs.Get(name)
		e.waitLB(portico, name, "adopted and converged by Portico", func(s *corev1.Service, lb *lbView) string {
			switch {
			case lb.Tags["portico-lb.io/service-uid"] != string(svc.UID):
				return "not tagged as Portico's yet"
			case lb.Tags["portico-lb.io/applied"] == "":
				return "not converged yet (no applied tag)"
			case kind == kindNLB && !strings.HasPrefix(lb.Listeners["TCP:80"].TargetGroup, "k8s-tg-"):
				return "listener still forwards to " + lb.Listeners["TCP:80"].TargetGroup
			}
			// cloud-provider-aws's own group, with rules Portico does not own, is detached.
			for _, g := range lb.SecurityGroups {
				if g.Name == "k8s-elb-"+lb.Name {
					return "still carries cloud-provider-aws's security group " + g.Name
				}
			}
			return ""
		})
	}
	calls := e.srv.Calls(t)
	for name, w := range watches {
		close(w.stop)
		<-w.done
		if len(w.gaps) > 0 || len(w.hostname) != 1 || !w.hostname[before[name]] {
			t.Errorf("%s: status during adoption: hostnames %v (want only %s), gaps %v", name, keys(w.hostname), before[name], w.gaps)
		}
	}
	creates := calls.Count(moto.ServiceELB, "CreateLoadBalancer") + calls.Count(moto.ServiceELBv2, "CreateLoadBalancer")
	deletes := calls.Count(moto.ServiceELB, "DeleteLoadBalancer") + calls.Count(moto.ServiceELBv2, "DeleteLoadBalancer")
	t.Logf("adoption of 2 load balancers: %d CreateLoadBalancer, %d DeleteLoadBalancer; calls %v", creates, deletes, calls)
	if creates != 0 || deletes != 0 {
		t.Errorf("adoption made %d CreateLoadBalancer and %d DeleteLoadBalancer calls, want none", creates, deletes)
	}

	// The adopted load balancers are Portico's now: the class-less Services keep the stock
	// finalizer, now Portico's (no step by hand), and deleting them deletes the load balancers.
	for name := range names {
		if f := e.svcs.Get(name).Finalizers; !slices.Equal(f, []string{stockFinalizer}) {
			t.Errorf("%s: finalizers %v after adoption, want the stock one alone", name, f)
		}
		e.delete(name)
		e.waitGone(portico, name)
		if held, err := e.aws.holds(before[name]); err != nil || held {
			t.Errorf("%s: after deletion moto still holds %s (%v)", name, before[name], err)
		}
	}
	// Not Portico's to delete (docs/migrate-cloud-provider-aws.md, step 6): what cloud-provider-aws made
	// besides the load balancers.
	t.Logf("left by cloud-provider-aws after the Services were deleted:\n%s\nnode rules: %v", e.srv.Owned(t, e.cluster), e.aws.ownedNodeRules())
}
