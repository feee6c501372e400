package servicemodel

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/servicerules"
)

func baseService(mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func node(name string, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeExternalIP, Address: "198.18.200.1"},
			{Type: corev1.NodeInternalIP, Address: "198.19.0.10"},
		}},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

var allCaps = providers.Capabilities{SessionAffinity: true, MixedProtocols: true, RequestedIPs: true}

func TestBuildLoadBalancer(t *testing.T) {
	tests := []struct {
		name    string
		svc     *corev1.Service
		caps    providers.Capabilities
		wantErr []string // field paths that must be reported
		check   func(t *testing.T, lb *providers.LoadBalancer)
	}{
		{
			name: "plain",
			svc:  baseService(),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				if lb.Ref != (providers.Ref{Namespace: "ns", Name: "web", UID: "uid-1"}) {
					t.Errorf("ref = %+v", lb.Ref)
				}
				if len(lb.Ports) != 1 || lb.Ports[0] != (providers.Port{Name: "http", Protocol: providers.TCP, Port: 80, NodePort: 30080}) {
					t.Errorf("ports = %+v", lb.Ports)
				}
				if len(lb.SourceRanges) != 0 || lb.Internal || lb.LocalTrafficOnly {
					t.Errorf("unexpected defaults: %+v", lb)
				}
			},
		},
		{
			name: "spec source ranges win over the annotation",
			svc: baseService(func(s *corev1.Service) {
				s.Annotations = map[string]string{"service.beta.kubernetes.io/load-balancer-source-ranges": "198.18.1.0/24"}
				s.Spec.LoadBalancerSourceRanges = []string{"198.18.2.7/24", " fd00:c613::/64 "}
			}),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				want := []netip.Prefix{netip.MustParsePrefix("198.18.2.0/24"), netip.MustParsePrefix("fd00:c613::/64")}
				if !slices.Equal(lb.SourceRanges, want) {
					t.Errorf("source ranges = %v, want %v", lb.SourceRanges, want)
				}
			},
		},
		{
			name: "annotation source ranges when the spec has none",
			svc: baseService(func(s *corev1.Service) {
				s.Annotations = map[string]string{"service.beta.kubernetes.io/load-balancer-source-ranges": "198.18.1.0/24"}
			}),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				if !slices.Equal(lb.SourceRanges, []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")}) {
					t.Errorf("source ranges = %v", lb.SourceRanges)
				}
			},
		},
		{
			name:    "bad spec source range",
			svc:     baseService(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"nope"} }),
			caps:    allCaps,
			wantErr: []string{"spec.loadBalancerSourceRanges[0]"},
		},
		{
			name: "every problem is reported at once",
			svc: baseService(func(s *corev1.Service) {
				s.Annotations = map[string]string{"portico-lb.io/internal": "yes"}
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.Ports[0].NodePort = 0
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
				s.Spec.LoadBalancerIP = "198.18.128.5"
			}),
			caps: providers.Capabilities{NeedsNodePorts: true},
			wantErr: []string{
				"metadata.annotations[portico-lb.io/internal]", "spec.sessionAffinity", "spec.ports[0].nodePort",
				"spec.ports[1].nodePort", "spec.ports", "spec.loadBalancerIP",
			},
		},
		{
			name: "unsupported protocol and family",
			svc: baseService(func(s *corev1.Service) {
				s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
			}),
			caps:    providers.Capabilities{Protocols: []providers.Protocol{providers.TCP, providers.UDP}, IPFamilies: []providers.IPFamily{providers.IPv4}},
			wantErr: []string{"spec.ports[0].protocol", "spec.ipFamilies[0]"},
		},
		{
			name: "node ports not allocated is fine for a VIP provider",
			svc: baseService(func(s *corev1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.Ports[0].NodePort = 0
			}),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				if lb.Ports[0].NodePort != 0 {
					t.Errorf("node port = %d", lb.Ports[0].NodePort)
				}
			},
		},
		{
			name: "local traffic policy and affinity timeout",
			svc: baseService(func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 31000
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
			}),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				if !lb.LocalTrafficOnly || lb.HealthCheckNodePort != 31000 {
					t.Errorf("policy = %v/%d", lb.LocalTrafficOnly, lb.HealthCheckNodePort)
				}
				if lb.SessionAffinity != (providers.SessionAffinity{ClientIP: true, Timeout: 30 * time.Second}) {
					t.Errorf("affinity = %+v", lb.SessionAffinity)
				}
			},
		},
		{
			name: "requested IP from the spec or the annotation, conflict reported",
			svc: baseService(func(s *corev1.Service) {
				s.Spec.LoadBalancerIP = "198.18.128.5"
				s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": "198.18.128.6"}
			}),
			caps:    allCaps,
			wantErr: []string{"spec.loadBalancerIP"},
		},
		{
			name: "requested IPs from the annotation, dual stack",
			svc: baseService(func(s *corev1.Service) {
				s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": "198.18.128.6,fd00:c613::6"}
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			}),
			caps: allCaps,
			check: func(t *testing.T, lb *providers.LoadBalancer) {
				want := []netip.Addr{netip.MustParseAddr("198.18.128.6"), netip.MustParseAddr("fd00:c613::6")}
				if !slices.Equal(lb.RequestedIPs, want) || !slices.Equal(lb.IPFamilies, []providers.IPFamily{providers.IPv4, providers.IPv6}) {
					t.Errorf("requested %v families %v", lb.RequestedIPs, lb.IPFamilies)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb, errs := BuildLoadBalancer(tt.svc, []corev1.Node{node("n1")}, tt.caps, nil)
			if len(tt.wantErr) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				tt.check(t, lb)
				return
			}
			if lb != nil {
				t.Errorf("model returned with errors")
			}
			msg := errs.ToAggregate().Error()
			for _, f := range tt.wantErr {
				if !strings.Contains(msg, f+":") {
					t.Errorf("errors %q do not name %s", msg, f)
				}
			}
		})
	}
}

func TestEligibleNodes(t *testing.T) {
	now := metav1.Now()
	nodes := []corev1.Node{
		node("c"),
		node("a"),
		node("excluded", func(n *corev1.Node) { n.Labels = map[string]string{servicerules.ExcludeFromLBLabel: ""} }),
		node("kept", func(n *corev1.Node) { n.Labels = map[string]string{servicerules.ExcludeFromLBLabel: "false"} }),
		node("deleting", func(n *corev1.Node) { n.DeletionTimestamp = &now }),
		node("tainted", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: servicerules.ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}),
		node("notready", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		}),
		node("external-only", func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.18.200.9"}}
		}),
	}
	got := EligibleNodes(nodes)
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
	}
	if want := []string{"a", "c", "external-only", "kept", "notready"}; !slices.Equal(names, want) {
		t.Fatalf("eligible = %v, want %v", names, want)
	}
	if got[0].Addresses[0] != netip.MustParseAddr("198.19.0.10") {
		t.Errorf("InternalIP must be preferred: %v", got[0].Addresses)
	}
	if got[2].Addresses[0] != netip.MustParseAddr("198.18.200.9") {
		t.Errorf("ExternalIP fallback: %v", got[2].Addresses)
	}
}

// TestBuildLoadBalancerOptions: the provider's options parser sees the Service's annotations, its
// result arrives in Options, and its problems join the Service's other problems.
func TestBuildLoadBalancerOptions(t *testing.T) {
	type opts struct{ Pool string }
	parse := func(ann map[string]string) (providers.ServiceOptions, field.ErrorList) {
		v := ann["example.com/pool"]
		if v == "bad" {
			return opts{}, field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key("example.com/pool"), v, "bad pool")}
		}
		return opts{Pool: v}, nil
	}
	withPool := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations = map[string]string{"example.com/pool": v} }
	}
	lb, errs := BuildLoadBalancer(baseService(withPool("edge")), nil, allCaps, parse)
	if len(errs) > 0 || lb.Options != (opts{Pool: "edge"}) {
		t.Fatalf("got %+v, %v", lb, errs)
	}
	svc := baseService(withPool("bad"), func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP })
	lb, errs = BuildLoadBalancer(svc, nil, providers.Capabilities{}, parse)
	msg := errs.ToAggregate().Error()
	if lb != nil || !strings.Contains(msg, "metadata.annotations[example.com/pool]") || !strings.Contains(msg, "spec.sessionAffinity") {
		t.Errorf("got %+v, %v", lb, errs)
	}
}
