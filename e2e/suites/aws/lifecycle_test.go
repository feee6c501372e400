package aws_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/moto"
)

// TestReplacementNoStatusGap changes what AWS cannot change in place, the scheme and then the
// kind, while polling the Service's status and moto: the status must always name a load
// balancer moto holds (create the replacement, switch status, then delete the old one).
func TestReplacementNoStatusGap(t *testing.T) {
	for _, kind := range []string{kindNLB, kindClassic} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p := e.startController(ctlOptions{})
			const name = "swap"
			svc := e.create(e.lbService(name, kind))
			e.waitLB(p, name, "created", nil)
			other := kindClassic
			if kind == kindClassic {
				other = kindNLB
			}
			for _, step := range []struct {
				what   string
				mutate func(*corev1.Service)
				scheme string
				kind   string
			}{
				{"scheme internal", func(s *corev1.Service) { s.Annotations[annotations.AWSLoadBalancerInternal] = "true" }, "internal", kind},
				{"kind " + other, func(s *corev1.Service) {
					if other == kindNLB {
						s.Annotations[annotations.AWSLoadBalancerType] = "nlb"
					} else {
						delete(s.Annotations, annotations.AWSLoadBalancerType)
					}
				}, "internal", other},
			} {
				watch := watchStatus(e, name)
				e.update(name, step.mutate)
				e.waitLB(p, name, step.what, func(s *corev1.Service, lb *lbView) string {
					if lb.Scheme != step.scheme || lb.Kind != step.kind {
						return fmt.Sprintf("%s %s", lb.Kind, lb.Scheme)
					}
					if n := len(lbsOf(e.srv.Owned(t, e.cluster), string(svc.UID))); n != 1 {
						return fmt.Sprintf("%d load balancers for the Service, want 1", n)
					}
					return ""
				})
				t.Run(strings.ReplaceAll(step.what, " ", "-"), watch.stopAndCheck)
			}
			e.delete(name)
			e.waitGone(p, name)
			e.expectNothingOwned()
		})
	}
}

// TestControllerLifecycle drives one Service of each kind through portico-controller (its
// class) from create to delete and checks, at every step, what moto holds for the load
// balancer the Service's status names.
func TestControllerLifecycle(t *testing.T) {
	for _, kind := range []string{kindNLB, kindClassic} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p := e.startController(ctlOptions{})
			lifecycle(t, e, p, kind)
		})
	}
}

// lifecycle is the walk shared by the controller and CCM tests.
func lifecycle(t *testing.T, e *env, p *proc, kind string) {
	const name = "web"
	all := e.instanceIDs(0, 1, 2)

	// Create: status names the load balancer moto holds, internet-facing, one listener on 80
	// to the node port, every node a target, TCP health check on the traffic port.
	e.create(e.lbService(name, kind))
	svc, lb := e.waitLB(p, name, "created", func(s *corev1.Service, lb *lbView) string {
		return expectLB(s, lb, kind, lbWant{scheme: "internet-facing", ports: map[string]int32{"TCP:80": 80}, targets: all})
	})
	uid := string(svc.UID)
	if !slices.Contains(svc.Finalizers, finalizer) && !slices.Contains(svc.Finalizers, stockFinalizer) {
		t.Errorf("finalizers %v lack the controller's", svc.Finalizers)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	if got, want := healthCheckOf(lb, kind), tcpHealth(kind, nodePort); got != want {
		t.Errorf("health check = %q, want %q", got, want)
	}
	if lb.Tags[moto.ClusterTag(e.cluster)] != "owned" || lb.Tags["portico-lb.io/service-uid"] != uid {
		t.Errorf("load balancer tags %v lack ownership for cluster %s and uid %s", lb.Tags, e.cluster, uid)
	}

	// externalTrafficPolicy Local: the health check moves to HTTP healthCheckNodePort/healthz;
	// back to Cluster: TCP on the traffic port again.
	svc = e.update(name, func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	hcnp := svc.Spec.HealthCheckNodePort
	if hcnp == 0 {
		t.Fatalf("no healthCheckNodePort allocated")
	}
	e.waitLB(p, name, "health check on healthCheckNodePort", func(s *corev1.Service, lb *lbView) string {
		if got, want := healthCheckOf(lb, kind), fmt.Sprintf("HTTP:%d/healthz", hcnp); got != want {
			return fmt.Sprintf("health check %q, want %q", got, want)
		}
		return ""
	})
	e.update(name, func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster })
	e.waitLB(p, name, "health check back on the traffic port", func(s *corev1.Service, lb *lbView) string {
		if got, want := healthCheckOf(lb, kind), tcpHealth(kind, nodePort); got != want {
			return fmt.Sprintf("health check %q, want %q", got, want)
		}
		return ""
	})

	// Annotations: TLS on 443 with the certificate, cross-zone, extra tags, health-check
	// protocol and path; Classic also an HTTP backend and PROXY protocol.
	cert := e.f.Certificates[0].ARN
	svc = e.update(name, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
		s.Annotations[annotations.AWSSSLCert] = cert
		s.Annotations[annotations.AWSSSLPorts] = "443"
		s.Annotations[annotations.AWSCrossZoneLoadBalancing] = "true"
		s.Annotations[annotations.AWSAdditionalResourceTags] = "team=e2e,cost-center=42"
		s.Annotations[annotations.AWSHealthCheckProtocol] = "http"
		s.Annotations[annotations.AWSHealthCheckPath] = "/ready"
		if kind == kindClassic {
			s.Annotations[annotations.AWSBackendProtocol] = "http"
			s.Annotations[annotations.AWSProxyProtocol] = "*"
		}
	})
	httpsNodePort := svc.Spec.Ports[1].NodePort
	e.waitLB(p, name, "annotations applied", func(s *corev1.Service, lb *lbView) string {
		var why []string
		tls, plain := "TLS:443", "TCP:80"
		if kind == kindClassic {
			tls, plain = "HTTPS:443", "HTTP:80"
		}
		if l, ok := lb.Listeners[tls]; !ok || l.Cert != cert {
			why = append(why, fmt.Sprintf("no %s listener with certificate %s", tls, cert))
		} else if l.BackendPort != httpsNodePort {
			why = append(why, fmt.Sprintf("%s forwards to %d, want node port %d", tls, l.BackendPort, httpsNodePort))
		}
		if _, ok := lb.Listeners[plain]; !ok || len(lb.Listeners) != 2 {
			why = append(why, fmt.Sprintf("listeners %v, want %s and %s", keys(lb.Listeners), plain, tls))
		}
		crossZone := "load_balancing.cross_zone.enabled"
		if kind == kindClassic {
			crossZone = "cross_zone"
		}
		if lb.Attrs[crossZone] != "true" {
			why = append(why, "cross-zone not enabled")
		}
		if lb.Tags["team"] != "e2e" || lb.Tags["cost-center"] != "42" {
			why = append(why, "additional tags missing")
		}
		want := "HTTP:traffic-port/ready"
		if kind == kindClassic {
			want = fmt.Sprintf("HTTP:%d/ready", nodePort)
		}
		if got := healthCheckOf(lb, kind); got != want {
			why = append(why, fmt.Sprintf("health check %q, want %q", got, want))
		}
		if kind == kindClassic && len(lb.BackendPolicies[nodePort]) == 0 {
			why = append(why, fmt.Sprintf("no PROXY protocol policy on instance port %d", nodePort))
		}
		return strings.Join(why, "; ")
	})

	// Mixed protocol on one port (NLB): TCP and UDP 53 on one node port -> one TCP_UDP listener.
	if kind == kindNLB {
		svc = e.update(name, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP})
		})
		dnsNodePort := svc.Spec.Ports[2].NodePort
		e.update(name, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: dnsNodePort})
		})
		e.waitLB(p, name, "TCP_UDP listener on 53", func(s *corev1.Service, lb *lbView) string {
			l, ok := lb.Listeners["TCP_UDP:53"]
			if !ok || l.BackendProtocol != "TCP_UDP" || l.BackendPort != dnsNodePort || !slices.Equal(l.Targets, all) {
				return fmt.Sprintf("no TCP_UDP:53 listener to a TCP_UDP target group on %d with every node", dnsNodePort)
			}
			if _, ok := lb.Listeners["TCP:53"]; ok {
				return "a TCP:53 listener is left beside TCP_UDP:53"
			}
			return ""
		})
	}

	// Source ranges follow loadBalancerSourceRanges, both ways.
	for _, ranges := range [][]string{{"198.18.200.0/24", "198.19.0.0/16"}, {"198.18.201.0/24"}} {
		e.update(name, func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = ranges })
		e.waitLB(p, name, fmt.Sprintf("source ranges %v", ranges), func(s *corev1.Service, lb *lbView) string {
			got, err := e.aws.sourceCIDRs(lb)
			if err != nil {
				return err.Error()
			}
			if !slices.Equal(got, slices.Sorted(slices.Values(ranges))) {
				return fmt.Sprintf("source CIDRs %v, want %v", got, ranges)
			}
			return ""
		})
	}

	// Nodes: one added, one excluded by label, one deleted, then a target-node-labels filter.
	added := e.f.AddNode(t)
	e.addNode(added, nil)
	waitTargets(e, p, name, kind, "node added", e.instanceIDs(0, 1, 2, 3))
	e.labelNode(e.f.Nodes[0].Name, map[string]*string{"node.kubernetes.io/exclude-from-external-load-balancers": ptr.To("true")})
	waitTargets(e, p, name, kind, "node 0 excluded", e.instanceIDs(1, 2, 3))
	e.deleteNode(e.f.Nodes[1].Name)
	waitTargets(e, p, name, kind, "node 1 deleted", e.instanceIDs(2, 3))
	e.labelNode(e.f.Nodes[3].Name, map[string]*string{"portico.test/edge": ptr.To("true")})
	e.update(name, func(s *corev1.Service) { s.Annotations[annotations.AWSTargetNodeLabels] = "portico.test/edge=true" })
	waitTargets(e, p, name, kind, "label filter", e.instanceIDs(3))
	e.update(name, func(s *corev1.Service) { delete(s.Annotations, annotations.AWSTargetNodeLabels) })
	waitTargets(e, p, name, kind, "label filter removed", e.instanceIDs(2, 3))

	// internet-facing -> internal: a new load balancer replaces the old one (the status gap
	// during the switch is TestReplacementNoStatusGap's).
	e.update(name, func(s *corev1.Service) { s.Annotations[annotations.AWSLoadBalancerInternal] = "true" })
	_, lb2 := e.waitLB(p, name, "internal", func(s *corev1.Service, lb *lbView) string {
		if lb.Scheme != "internal" {
			return "scheme " + lb.Scheme
		}
		if n := len(lbsOf(e.srv.Owned(t, e.cluster), uid)); n != 1 {
			return fmt.Sprintf("%d load balancers for the Service, want 1 (the old one deleted)", n)
		}
		return ""
	})
	if lb2.Name == lb.Name {
		t.Errorf("scheme change kept the load balancer name %s", lb.Name)
	}

	// Delete: finalizer released, nothing owned left.
	e.delete(name)
	e.waitGone(p, name)
	e.owned()
	e.expectNothingOwned()
}

// lbWant is what expectLB compares.
type lbWant struct {
	scheme  string
	ports   map[string]int32 // listener key -> Service port (its node port is looked up)
	targets []string
}

// expectLB returns why lb does not match w for svc, or "".
func expectLB(svc *corev1.Service, lb *lbView, kind string, w lbWant) string {
	var why []string
	if lb.Kind != kind {
		why = append(why, "kind "+lb.Kind)
	}
	if lb.Scheme != w.scheme {
		why = append(why, "scheme "+lb.Scheme)
	}
	for key, port := range w.ports {
		l, ok := lb.Listeners[key]
		if !ok {
			why = append(why, "no listener "+key)
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Port == port && l.BackendPort != sp.NodePort {
				why = append(why, fmt.Sprintf("%s forwards to %d, want node port %d", key, l.BackendPort, sp.NodePort))
			}
		}
	}
	if w.targets != nil {
		if got := targetsOf(lb, kind); !slices.Equal(got, w.targets) {
			why = append(why, fmt.Sprintf("targets %v, want %v", got, w.targets))
		}
	}
	return strings.Join(why, "; ")
}

// targetsOf returns a Classic ELB's instances, or the NLB's targets when every listener has
// the same ones ("mismatch" otherwise).
func targetsOf(lb *lbView, kind string) []string {
	if kind == kindClassic {
		return lb.Instances
	}
	var out []string
	first := true
	for _, l := range lb.Listeners {
		if first {
			out, first = l.Targets, false
		} else if !slices.Equal(out, l.Targets) {
			return []string{"mismatch between listeners"}
		}
	}
	return out
}

func waitTargets(e *env, p *proc, name, kind, what string, want []string) {
	e.t.Helper()
	e.waitLB(p, name, what, func(s *corev1.Service, lb *lbView) string {
		if got := targetsOf(lb, kind); !slices.Equal(got, want) {
			return fmt.Sprintf("targets %v, want %v", got, want)
		}
		return ""
	})
}

// healthCheckOf is the Classic ELB's health check, or the NLB's when every target group has
// the same one.
func healthCheckOf(lb *lbView, kind string) string {
	if kind == kindClassic {
		return lb.HealthCheck
	}
	hc := ""
	for _, l := range lb.Listeners {
		if hc != "" && hc != l.HealthCheck {
			return "differs between target groups"
		}
		hc = l.HealthCheck
	}
	return hc
}

func tcpHealth(kind string, nodePort int32) string {
	if kind == kindClassic {
		return fmt.Sprintf("TCP:%d", nodePort)
	}
	return "TCP:traffic-port"
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return slices.Sorted(slices.Values(out))
}

// statusWatch polls a Service's status and moto as fast as it can and records every moment the
// status named a load balancer moto did not hold (the same hostname read before and after the
// look-up), or named none.
type statusWatch struct {
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	gaps     []string
	polls    int
	hostname map[string]bool
}

func watchStatus(e *env, name string) *statusWatch {
	w := &statusWatch{stop: make(chan struct{}), done: make(chan struct{}), hostname: map[string]bool{}}
	read := func() string {
		s, err := e.cs.CoreV1().Services(e.ns).Get(t0(), name, getOpts)
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].Hostname
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			h1 := read()
			var found bool
			if h1 != "" {
				held, err := e.aws.holds(h1)
				if err != nil {
					continue
				}
				found = held
			}
			h2 := read()
			w.mu.Lock()
			w.polls++
			w.hostname[h1] = true
			if h1 == h2 && !found {
				w.gaps = append(w.gaps, fmt.Sprintf("%s status named %q, which moto did not hold", time.Now().Format("15:04:05.000"), h1))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *statusWatch) stopAndCheck(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("status watch: %d polls, hostnames seen %v", w.polls, keys(w.hostname))
	if len(w.gaps) > 0 {
		t.Errorf("status pointed at nothing during the replacement (%d of %d polls):\n%s", len(w.gaps), w.polls, strings.Join(w.gaps, "\n"))
	}
	if len(w.hostname) < 2 {
		t.Errorf("status watch saw hostnames %v; want the old and the new load balancer", keys(w.hostname))
	}
}
