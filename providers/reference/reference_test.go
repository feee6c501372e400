package reference_test

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/providertest"
	"github.com/portico-lb/portico/providers/reference"
)

func TestConformance(t *testing.T) {
	cases := []struct {
		name  string
		opts  reference.Options
		suite providertest.Options
	}{
		{
			name: "zero options",
		},
		{
			name: "bare-metal like",
			opts: reference.Options{Capabilities: providers.Capabilities{
				SessionAffinity: true, MixedProtocols: true, RequestedIPs: true,
			}},
			suite: providertest.Options{RequestableIP: netip.MustParseAddr("198.18.128.200"), Parallel: true},
		},
		{
			name: "classic cloud LB",
			opts: reference.Options{Hostnames: true, Capabilities: providers.Capabilities{
				NeedsNodePorts: true,
				Protocols:      []providers.Protocol{providers.TCP},
				IPFamilies:     []providers.IPFamily{providers.IPv4},
			}},
			suite: providertest.Options{Hostnames: true},
		},
		{
			name: "network LB dual-stack",
			opts: reference.Options{Hostnames: true, Capabilities: providers.Capabilities{
				NeedsNodePorts: true, MixedProtocols: true, RequestedIPs: true,
				Protocols: []providers.Protocol{providers.TCP, providers.UDP},
			}},
			suite: providertest.Options{
				Hostnames:     true,
				FamilySets:    [][]providers.IPFamily{{providers.IPv4, providers.IPv6}, {providers.IPv6, providers.IPv4}},
				RequestableIP: netip.MustParseAddr("2001:db8:128::20"),
			},
		},
		{
			name: "IPv6 only",
			opts: reference.Options{
				Pool:         netip.MustParsePrefix("2001:db8:6::/120"),
				Capabilities: providers.Capabilities{SessionAffinity: true, RequestedIPs: true},
			},
			suite: providertest.Options{RequestableIP: netip.MustParseAddr("2001:db8:6::20")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.suite.Check = checkDesired
			providertest.Run(t, func(t *testing.T) providers.Provider {
				p := reference.New(tc.opts)
				// Registered before the suite's deletes, so it runs after them.
				t.Cleanup(func() {
					if refs := p.Refs(); len(refs) > 0 {
						t.Errorf("load balancers left after the subtest: %v", refs)
					}
				})
				return p
			}, tc.suite)
		})
	}
}

// checkDesired verifies the reference stored exactly what it was asked for.
func checkDesired(t *testing.T, p providers.Provider, lb *providers.LoadBalancer, _ providers.Status) {
	t.Helper()
	got, ok := p.(*reference.Provider).Desired(lb.Ref)
	if !ok {
		t.Fatalf("Desired(%s): no load balancer after Ensure", lb.Ref)
	}
	if !reflect.DeepEqual(got, lb) {
		t.Errorf("Desired(%s) = %+v, want %+v", lb.Ref, got, lb)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func ref(name string) providers.Ref {
	return providers.Ref{Namespace: "default", Name: name, UID: "0f4a2c1e-" + name}
}

func lb(name string, fams ...providers.IPFamily) *providers.LoadBalancer {
	if len(fams) == 0 {
		fams = []providers.IPFamily{providers.IPv4}
	}
	return &providers.LoadBalancer{
		Ref:        ref(name),
		IPFamilies: fams,
		Ports:      []providers.Port{{Name: "http", Protocol: providers.TCP, Port: 80, NodePort: 30080}},
	}
}

func ips(st providers.Status) []netip.Addr {
	var out []netip.Addr
	for _, in := range st.Ingress {
		out = append(out, in.IP)
	}
	return out
}

func mustEnsure(t *testing.T, p *reference.Provider, l *providers.LoadBalancer) providers.Status {
	t.Helper()
	st, err := p.Ensure(ctx(t), l)
	if err != nil {
		t.Fatalf("Ensure(%s): %v", l.Ref, err)
	}
	return st
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// invalidFields returns the Field of every *providers.InvalidError in err, following
// errors.Join.
func invalidFields(err error) []string {
	var out []string
	var ie *providers.InvalidError
	if errors.As(err, &ie) && ie == err {
		return []string{ie.Field}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, invalidFields(e)...)
		}
	}
	return out
}

func TestValidation(t *testing.T) {
	cloud := providers.Capabilities{NeedsNodePorts: true, Protocols: []providers.Protocol{providers.TCP, providers.UDP}}
	cases := []struct {
		name   string
		caps   providers.Capabilities
		mutate func(*providers.LoadBalancer)
		fields []string // nil: valid
	}{
		{"valid", cloud, func(*providers.LoadBalancer) {}, nil},
		{"no families", cloud, func(l *providers.LoadBalancer) { l.IPFamilies = nil }, []string{"spec.ipFamilies"}},
		{"unknown family", cloud, func(l *providers.LoadBalancer) { l.IPFamilies = []providers.IPFamily{"IPv5"} }, []string{"spec.ipFamilies[0]"}},
		{"duplicate family", cloud, func(l *providers.LoadBalancer) {
			l.IPFamilies = []providers.IPFamily{providers.IPv4, providers.IPv4}
		}, []string{"spec.ipFamilies[1]"}},
		{"unsupported family", providers.Capabilities{IPFamilies: []providers.IPFamily{providers.IPv4}}, func(l *providers.LoadBalancer) {
			l.IPFamilies = []providers.IPFamily{providers.IPv4, providers.IPv6}
		}, []string{"spec.ipFamilies[1]"}},
		{"no ports", cloud, func(l *providers.LoadBalancer) { l.Ports = nil }, []string{"spec.ports"}},
		{"unknown protocol", cloud, func(l *providers.LoadBalancer) { l.Ports[0].Protocol = "QUIC" }, []string{"spec.ports[0].protocol"}},
		{"unsupported protocol", cloud, func(l *providers.LoadBalancer) { l.Ports[0].Protocol = providers.SCTP }, []string{"spec.ports[0].protocol"}},
		{"mixed protocols", cloud, func(l *providers.LoadBalancer) {
			l.Ports = append(l.Ports,
				providers.Port{Protocol: providers.UDP, Port: 53, NodePort: 30053},
				providers.Port{Protocol: providers.UDP, Port: 54, NodePort: 30054})
		}, []string{"spec.ports[1].protocol"}},
		{"mixed protocols allowed", providers.Capabilities{MixedProtocols: true}, func(l *providers.LoadBalancer) {
			l.Ports = append(l.Ports, providers.Port{Protocol: providers.UDP, Port: 80, NodePort: 30080})
		}, nil},
		{"node port 0", cloud, func(l *providers.LoadBalancer) {
			l.Ports = append(l.Ports, providers.Port{Protocol: providers.TCP, Port: 443})
		}, []string{"spec.allocateLoadBalancerNodePorts"}},
		{"no node ports at all, reported once", cloud, func(l *providers.LoadBalancer) {
			l.Ports = []providers.Port{{Protocol: providers.TCP, Port: 80}, {Protocol: providers.TCP, Port: 443}}
		}, []string{"spec.allocateLoadBalancerNodePorts"}},
		{"node port 0 without NeedsNodePorts", providers.Capabilities{}, func(l *providers.LoadBalancer) { l.Ports[0].NodePort = 0 }, nil},
		{"port out of range", cloud, func(l *providers.LoadBalancer) { l.Ports[0].Port = 70000 }, []string{"spec.ports[0].port"}},
		{"node port out of range", cloud, func(l *providers.LoadBalancer) { l.Ports[0].NodePort = -1 }, []string{"spec.ports[0].nodePort"}},
		{"duplicate port", cloud, func(l *providers.LoadBalancer) { l.Ports = append(l.Ports, l.Ports[0]) }, []string{"spec.ports[1]"}},
		{"session affinity", cloud, func(l *providers.LoadBalancer) { l.SessionAffinity.ClientIP = true }, []string{"spec.sessionAffinity"}},
		{"session affinity supported", providers.Capabilities{SessionAffinity: true}, func(l *providers.LoadBalancer) {
			l.SessionAffinity = providers.SessionAffinity{ClientIP: true, Timeout: time.Hour}
		}, nil},
		{"negative affinity timeout", providers.Capabilities{SessionAffinity: true}, func(l *providers.LoadBalancer) {
			l.SessionAffinity = providers.SessionAffinity{ClientIP: true, Timeout: -time.Second}
		}, []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds"}},
		{"requested IP unsupported", cloud, func(l *providers.LoadBalancer) { l.RequestedIPs = addrs("198.18.128.9") }, []string{"spec.loadBalancerIP"}},
		{"requested IP outside pool", providers.Capabilities{RequestedIPs: true}, func(l *providers.LoadBalancer) {
			l.RequestedIPs = addrs("198.18.129.1")
		}, []string{"spec.loadBalancerIP"}},
		{"requested network address", providers.Capabilities{RequestedIPs: true}, func(l *providers.LoadBalancer) {
			l.RequestedIPs = addrs("198.18.128.0")
		}, []string{"spec.loadBalancerIP"}},
		{"requested IP of unrequested family", providers.Capabilities{RequestedIPs: true}, func(l *providers.LoadBalancer) {
			l.RequestedIPs = addrs("2001:db8:128::9")
		}, []string{"spec.loadBalancerIP"}},
		{"two requested IPs of one family", providers.Capabilities{RequestedIPs: true}, func(l *providers.LoadBalancer) {
			l.RequestedIPs = addrs("198.18.128.9", "198.18.128.10")
		}, []string{"spec.loadBalancerIP"}},
		{"requested IPs dual-stack", providers.Capabilities{RequestedIPs: true}, func(l *providers.LoadBalancer) {
			l.IPFamilies = []providers.IPFamily{providers.IPv6, providers.IPv4}
			l.RequestedIPs = addrs("198.18.128.9", "2001:db8:128::9")
		}, nil},
		{"invalid source range", cloud, func(l *providers.LoadBalancer) {
			l.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}
		}, []string{"spec.loadBalancerSourceRanges[1]"}},
		{"local traffic without health check port", cloud, func(l *providers.LoadBalancer) { l.LocalTrafficOnly = true }, []string{"spec.healthCheckNodePort"}},
		{"local traffic with health check port", cloud, func(l *providers.LoadBalancer) {
			l.LocalTrafficOnly, l.HealthCheckNodePort = true, 32000
		}, nil},
		{"every problem reported", cloud, func(l *providers.LoadBalancer) {
			l.IPFamilies = nil
			l.SessionAffinity.ClientIP = true
			l.Ports[0].NodePort = 0
		}, []string{"spec.ipFamilies", "spec.allocateLoadBalancerNodePorts", "spec.sessionAffinity"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := reference.New(reference.Options{Capabilities: tc.caps})
			l := lb("web")
			tc.mutate(l)
			_, err := p.Ensure(ctx(t), l)
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("Ensure: %v", err)
				}
				return
			}
			if !providers.IsInvalid(err) {
				t.Fatalf("Ensure error = %v, want an *providers.InvalidError", err)
			}
			if got := invalidFields(err); !slices.Equal(got, tc.fields) {
				t.Errorf("invalid fields = %q, want %q (error: %v)", got, tc.fields, err)
			}
			if refs := p.Refs(); len(refs) != 0 {
				t.Errorf("rejected Ensure created %v", refs)
			}
		})
	}
}

func TestAllocation(t *testing.T) {
	p := reference.New(reference.Options{})
	web := lb("web", providers.IPv4, providers.IPv6)
	st := mustEnsure(t, p, web)
	want := addrs("198.18.128.1", "2001:db8:128::1")
	if got := ips(st); !slices.Equal(got, want) {
		t.Fatalf("ingress IPs = %v, want %v", got, want)
	}
	for _, in := range st.Ingress {
		if in.IPMode != providers.IPModeVIP {
			t.Errorf("ingress %s has IPMode %q, want VIP", in.IP, in.IPMode)
		}
	}

	// Stable across updates, including a reordered family list.
	update := lb("web", providers.IPv6, providers.IPv4)
	update.Ports[0].NodePort = 31000
	if got, want := ips(mustEnsure(t, p, update)), addrs("2001:db8:128::1", "198.18.128.1"); !slices.Equal(got, want) {
		t.Errorf("after update: ingress IPs = %v, want %v", got, want)
	}

	// Dropping IPv6 releases its address; next-fit hands out the following one first.
	mustEnsure(t, p, lb("web", providers.IPv4))
	if got, want := ips(mustEnsure(t, p, lb("api", providers.IPv6))), addrs("2001:db8:128::2"); !slices.Equal(got, want) {
		t.Errorf("api: ingress IPs = %v, want %v", got, want)
	}
	if err := p.Delete(ctx(t), ref("web")); err != nil {
		t.Fatal(err)
	}
	if got, want := ips(mustEnsure(t, p, lb("db"))), addrs("198.18.128.2"); !slices.Equal(got, want) {
		t.Errorf("db: ingress IPs = %v, want %v", got, want)
	}
}

func TestRequestedIPs(t *testing.T) {
	p := reference.New(reference.Options{Capabilities: providers.Capabilities{RequestedIPs: true}})
	web := lb("web")
	web.RequestedIPs = addrs("198.18.128.50")
	if got := ips(mustEnsure(t, p, web)); !slices.Equal(got, web.RequestedIPs) {
		t.Fatalf("ingress IPs = %v, want %v", got, web.RequestedIPs)
	}

	// Taken by web: another Service cannot have it, and the failed call creates nothing.
	api := lb("api")
	api.RequestedIPs = addrs("198.18.128.50")
	_, err := p.Ensure(ctx(t), api)
	var ie *providers.InvalidError
	if !errors.As(err, &ie) || ie.Field != "spec.loadBalancerIP" {
		t.Fatalf("Ensure(api) error = %v, want InvalidError for spec.loadBalancerIP", err)
	}
	if _, err := p.Get(ctx(t), api.Ref); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Get(api) error = %v, want ErrNotFound", err)
	}

	// web moves to another address; the old one is free for api.
	web.RequestedIPs = addrs("198.18.128.51")
	if got := ips(mustEnsure(t, p, web)); !slices.Equal(got, web.RequestedIPs) {
		t.Fatalf("after move: ingress IPs = %v, want %v", got, web.RequestedIPs)
	}
	if got := ips(mustEnsure(t, p, api)); !slices.Equal(got, api.RequestedIPs) {
		t.Errorf("api: ingress IPs = %v, want %v", got, api.RequestedIPs)
	}

	// Without a request web keeps the address it has.
	web.RequestedIPs = nil
	if got, want := ips(mustEnsure(t, p, web)), addrs("198.18.128.51"); !slices.Equal(got, want) {
		t.Errorf("request dropped: ingress IPs = %v, want %v", got, want)
	}

	// Delete frees it.
	if err := p.Delete(ctx(t), web.Ref); err != nil {
		t.Fatal(err)
	}
	db := lb("db")
	db.RequestedIPs = addrs("198.18.128.51")
	mustEnsure(t, p, db)
}

func TestPoolExhausted(t *testing.T) {
	p := reference.New(reference.Options{
		Pool:  netip.MustParsePrefix("198.18.0.0/29"), // .1 - .6
		Pool6: netip.MustParsePrefix("2001:db8::7/128"),
	})
	mustEnsure(t, p, lb("dual", providers.IPv4, providers.IPv6))

	// IPv6 is exhausted: the dual-stack Ensure fails and takes no IPv4 address either.
	_, err := p.Ensure(ctx(t), lb("dual-2", providers.IPv4, providers.IPv6))
	if !errors.Is(err, reference.ErrPoolExhausted) {
		t.Fatalf("Ensure error = %v, want ErrPoolExhausted", err)
	}
	if providers.IsInvalid(err) {
		t.Errorf("pool exhaustion reported as InvalidError: %v", err)
	}
	if got, want := p.Refs(), []providers.Ref{ref("dual")}; !slices.Equal(got, want) {
		t.Errorf("Refs() = %v, want %v", got, want)
	}

	for i, name := range []string{"a", "b", "c", "d", "e"} {
		want := netip.AddrFrom4([4]byte{198, 18, 0, byte(2 + i)})
		if got := ips(mustEnsure(t, p, lb(name))); !slices.Equal(got, []netip.Addr{want}) {
			t.Errorf("%s: ingress IPs = %v, want %v", name, got, want)
		}
	}
	if _, err := p.Ensure(ctx(t), lb("f")); !errors.Is(err, reference.ErrPoolExhausted) {
		t.Fatalf("Ensure(f) error = %v, want ErrPoolExhausted", err)
	}
	// An existing load balancer still converges while the pool is full.
	mustEnsure(t, p, lb("c"))

	// Freeing one address makes room; the pool wraps around to it.
	if err := p.Delete(ctx(t), ref("b")); err != nil {
		t.Fatal(err)
	}
	if got, want := ips(mustEnsure(t, p, lb("f"))), addrs("198.18.0.3"); !slices.Equal(got, want) {
		t.Errorf("f: ingress IPs = %v, want %v", got, want)
	}
}

func TestHostnames(t *testing.T) {
	p := reference.New(reference.Options{Hostnames: true})
	l := lb("web", providers.IPv4, providers.IPv6)
	l.Ref = providers.Ref{Namespace: "shop", Name: "web", UID: "5F0C3D2A-9b1e-4c7d-8e2f-0a1b2c3d4e5f"}
	st := mustEnsure(t, p, l)
	want := providers.Status{Ingress: []providers.Ingress{{Hostname: "web-shop-5f0c3d2a.lb.invalid"}}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status = %+v, want %+v", st, want)
	}

	long := lb(strings.Repeat("n", 63))
	long.Ref.Namespace = strings.Repeat("s", 63)
	host := mustEnsure(t, p, long).Ingress[0].Hostname
	label, domain, _ := strings.Cut(host, ".")
	if len(label) > 63 || domain != reference.HostnameDomain || !strings.HasPrefix(label, "nnnn") || !strings.HasSuffix(label, "-0f4a2c1e") {
		t.Errorf("hostname %q: want a label of at most 63 characters keeping the UID prefix, in %s", host, reference.HostnameDomain)
	}
}

func TestCallsAndFailNext(t *testing.T) {
	p := reference.New(reference.Options{})
	transient := errors.New("throttled")
	retry := providers.RetryAfter(time.Second, "provisioning")
	p.FailNext(reference.OpEnsure, transient)
	p.FailNext(reference.OpEnsure, retry)
	p.FailNext(reference.OpGet, transient)
	p.FailNext(reference.OpDelete, transient)

	web := lb("web")
	if _, err := p.Ensure(ctx(t), web); !errors.Is(err, transient) {
		t.Errorf("first Ensure error = %v, want %v", err, transient)
	}
	var re *providers.RetryError
	if _, err := p.Ensure(ctx(t), web); !errors.As(err, &re) {
		t.Errorf("second Ensure error = %v, want a RetryError", err)
	}
	if _, ok := p.Desired(web.Ref); ok {
		t.Error("failed Ensure calls created a load balancer")
	}
	mustEnsure(t, p, web)
	if _, err := p.Get(ctx(t), web.Ref); !errors.Is(err, transient) {
		t.Errorf("Get error = %v, want %v", err, transient)
	}
	if _, err := p.Get(ctx(t), web.Ref); err != nil {
		t.Errorf("second Get: %v", err)
	}
	if err := p.Delete(ctx(t), web.Ref); !errors.Is(err, transient) {
		t.Errorf("Delete error = %v, want %v", err, transient)
	}
	if _, err := p.Get(ctx(t), web.Ref); err != nil {
		t.Errorf("Get after failed Delete: %v", err)
	}
	if err := p.Delete(ctx(t), web.Ref); err != nil {
		t.Errorf("second Delete: %v", err)
	}

	want := map[string]int{reference.OpEnsure: 3, reference.OpGet: 3, reference.OpDelete: 2}
	if got := p.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("Calls() = %v, want %v", got, want)
	}

	for _, bad := range []func(){
		func() { p.FailNext("update", transient) },
		func() { p.FailNext(reference.OpGet, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("FailNext did not panic on misuse")
				}
			}()
			bad()
		}()
	}
}

func TestSetDelay(t *testing.T) {
	p := reference.New(reference.Options{})
	p.SetDelay(50 * time.Millisecond)

	short, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	if _, err := p.Ensure(short, lb("web")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ensure with a short deadline: error = %v, want DeadlineExceeded", err)
	}
	if _, ok := p.Desired(ref("web")); ok {
		t.Error("Ensure cut short by its context created a load balancer")
	}

	start := time.Now()
	mustEnsure(t, p, lb("web"))
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("Ensure took %s, want at least the 50ms delay", d)
	}
	p.SetDelay(0)
	if _, err := p.Get(short, ref("web")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with an expired context: error = %v, want DeadlineExceeded", err)
	}
}

func TestDriftAndRepairs(t *testing.T) {
	p := reference.New(reference.Options{})
	if p.Drift(ref("web")) {
		t.Error("Drift of a missing load balancer reported true")
	}
	web := lb("web")
	mustEnsure(t, p, web)
	mustEnsure(t, p, web)
	if got := p.Repairs(); got != 0 {
		t.Errorf("Repairs() = %d before any drift, want 0", got)
	}
	if !p.Drift(web.Ref) {
		t.Fatal("Drift(web) = false")
	}
	if _, err := p.Get(ctx(t), web.Ref); err != nil {
		t.Fatal(err)
	}
	if got := p.Repairs(); got != 0 {
		t.Errorf("Repairs() = %d after Get, want 0: only Ensure repairs", got)
	}
	mustEnsure(t, p, web)
	mustEnsure(t, p, web)
	if got := p.Repairs(); got != 1 {
		t.Errorf("Repairs() = %d, want 1", got)
	}
}

// testOptions stands for a provider's options: the reference provider copies them deeply too.
type testOptions struct{ Ranges []netip.Prefix }

func TestDesiredIsACopy(t *testing.T) {
	build := func() *providers.LoadBalancer {
		l := lb("web")
		l.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		l.Nodes = []providers.Node{{
			Name:      "node-a",
			Addresses: addrs("198.19.0.1"),
			Labels:    map[string]string{"zone": "a"},
		}}
		l.Options = &testOptions{Ranges: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}
		return l
	}
	p := reference.New(reference.Options{})
	l := build()
	mustEnsure(t, p, l)

	// The caller reuses its model.
	l.Ports[0].Port = 81
	l.Nodes[0].Labels["zone"] = "b"
	l.Nodes[0].Addresses[0] = netip.MustParseAddr("198.19.0.99")
	l.Options.(*testOptions).Ranges[0] = netip.MustParsePrefix("0.0.0.0/0")

	got, _ := p.Desired(l.Ref)
	if want := build(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Desired = %+v, want %+v", got, want)
	}
	// A test edits what Desired returned.
	got.Nodes[0].Labels["zone"] = "c"
	got.IPFamilies[0] = providers.IPv6
	if again, _ := p.Desired(l.Ref); !reflect.DeepEqual(again, build()) {
		t.Errorf("Desired changed after editing an earlier result: %+v", again)
	}
}

func TestCapabilities(t *testing.T) {
	p := reference.New(reference.Options{Capabilities: providers.Capabilities{Protocols: []providers.Protocol{providers.TCP}}})
	caps := p.Capabilities()
	if want := []providers.IPFamily{providers.IPv4, providers.IPv6}; !slices.Equal(caps.IPFamilies, want) {
		t.Errorf("IPFamilies = %v, want the pools' families %v", caps.IPFamilies, want)
	}
	caps.Protocols[0] = providers.UDP
	if got := p.Capabilities().Protocols; !slices.Equal(got, []providers.Protocol{providers.TCP}) {
		t.Errorf("Capabilities changed through a returned slice: %v", got)
	}
	if got := reference.New(reference.Options{Pool: netip.MustParsePrefix("2001:db8::/64")}).Capabilities().IPFamilies; !slices.Equal(got, []providers.IPFamily{providers.IPv6}) {
		t.Errorf("IPv6 pool: IPFamilies = %v, want [IPv6]", got)
	}
	if got := p.Name(); got != "reference" {
		t.Errorf("Name() = %q, want reference", got)
	}
}

func TestNewPanicsOnInconsistentOptions(t *testing.T) {
	for name, opts := range map[string]reference.Options{
		"IPv4 Pool6":              {Pool6: netip.MustParsePrefix("10.0.0.0/24")},
		"Pool6 with an IPv6 Pool": {Pool: netip.MustParsePrefix("2001:db8::/64"), Pool6: netip.MustParsePrefix("2001:db8:1::/64")},
		"family without a pool": {
			Pool:         netip.MustParsePrefix("2001:db8::/64"),
			Capabilities: providers.Capabilities{IPFamilies: []providers.IPFamily{providers.IPv4}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			reference.New(opts)
		})
	}
}

// TestConcurrentUse exercises every method at once; run it with -race.
func TestConcurrentUse(t *testing.T) {
	p := reference.New(reference.Options{Capabilities: providers.Capabilities{RequestedIPs: true}})
	c := ctx(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := string(rune('a' + i))
			for range 50 {
				l := lb(name, providers.IPv4, providers.IPv6)
				if _, err := p.Ensure(c, l); err != nil {
					t.Error(err)
					return
				}
				p.Drift(l.Ref)
				p.Desired(l.Ref)
				if _, err := p.Get(c, l.Ref); err != nil {
					t.Error(err)
					return
				}
				p.Calls()
				p.Refs()
				p.Repairs()
				p.SetDelay(0)
				if err := p.Delete(c, l.Ref); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if refs := p.Refs(); len(refs) != 0 {
		t.Errorf("Refs() = %v after deleting everything", refs)
	}
}
