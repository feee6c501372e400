package baremetal

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/providers"
)

var (
	v4   = []providers.IPFamily{providers.IPv4}
	v6   = []providers.IPFamily{providers.IPv6}
	dual = []providers.IPFamily{providers.IPv4, providers.IPv6}
)

func ref(name string) providers.Ref {
	return providers.Ref{Namespace: "ns", Name: name, UID: "uid-" + name}
}

func req(name string, mutate ...func(*Request)) Request {
	r := Request{Ref: ref(name), Families: v4, Sharing: Sharing{Ports: []PortKey{{providers.TCP, 80}}}}
	for _, m := range mutate {
		m(&r)
	}
	return r
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

type poolOpt func(*v1alpha1.AddressPool)

func mkpool(name string, age int, addrList []string, opts ...poolOpt) v1alpha1.AddressPool {
	ap := apool(name, age, addrList...)
	for _, o := range opts {
		o(&ap)
	}
	return ap
}

func noAuto(ap *v1alpha1.AddressPool)   { ap.Spec.AutoAssign = ptr.To(false) }
func internal(ap *v1alpha1.AddressPool) { ap.Spec.Internal = true }
func priority(n int32) poolOpt {
	return func(ap *v1alpha1.AddressPool) {
		if ap.Spec.ServiceAllocation == nil {
			ap.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{}
		}
		ap.Spec.ServiceAllocation.Priority = n
	}
}
func namespaces(ns ...string) poolOpt {
	return func(ap *v1alpha1.AddressPool) {
		ap.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{Namespaces: ns}
	}
}
func nsSelector(k, v string) poolOpt {
	return func(ap *v1alpha1.AddressPool) {
		ap.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}
	}
}
func svcSelector(k, v string) poolOpt {
	return func(ap *v1alpha1.AddressPool) {
		ap.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{ServiceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}
	}
}

// step is one Assign (or Release) on a shared Allocator.
type step struct {
	req     Request
	release bool
	pools   []v1alpha1.AddressPool // replaces the pools from this step on
	want    []string               // addresses; nil with an error
	invalid string                 // substring of an expected *providers.InvalidError
	pending string                 // substring of an expected *PendingError
}

func apool(name string, age int, addrs ...string) v1alpha1.AddressPool {
	return v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1700000000+int64(age), 0))},
		Spec:       v1alpha1.AddressPoolSpec{Addresses: addrs},
	}
}

func TestAllocator(t *testing.T) {
	small := []v1alpha1.AddressPool{mkpool("small", 0, []string{"198.18.10.0/30"})} // .1 and .2
	dualPool := []v1alpha1.AddressPool{mkpool("dual", 0, []string{"198.18.10.0/30", "2001:db8:10::/127"})}
	shared := func(key string, ports ...int32) func(*Request) {
		return func(r *Request) {
			r.Sharing.Key = key
			r.Sharing.Ports = nil
			for _, p := range ports {
				r.Sharing.Ports = append(r.Sharing.Ports, PortKey{providers.TCP, p})
			}
		}
	}
	local := func(sel string) func(*Request) {
		return func(r *Request) { r.Sharing.Backend = backendKey(true, map[string]string{"app": sel}) }
	}
	requested := func(ss ...string) func(*Request) { return func(r *Request) { r.Requested = addrs(ss...) } }
	current := func(ss ...string) func(*Request) { return func(r *Request) { r.Current = addrs(ss...) } }
	inPool := func(name string) func(*Request) { return func(r *Request) { r.Pool = name } }
	families := func(f []providers.IPFamily, p providers.IPFamilyPolicy) func(*Request) {
		return func(r *Request) { r.Families, r.Policy = f, p }
	}
	isInternal := func(r *Request) { r.Internal = true }

	tests := []struct {
		name  string
		pools []v1alpha1.AddressPool
		steps []step
	}{
		{name: "first free address, network avoided, distinct, exhausted pends", pools: small, steps: []step{
			{req: req("a"), want: []string{"198.18.10.1"}},
			{req: req("b"), want: []string{"198.18.10.2"}},
			{req: req("c"), pending: "no free IPv4 address in pool(s) small"},
			{req: req("a"), want: []string{"198.18.10.1"}}, // nothing moved
			{req: req("b"), release: true},
			{req: req("c"), want: []string{"198.18.10.2"}},
		}},
		{name: "priority: lowest non-zero first, zero last, then name", pools: []v1alpha1.AddressPool{
			mkpool("a-zero", 0, []string{"198.18.1.1/32"}),
			mkpool("b-two", 0, []string{"198.18.2.1/32"}, priority(2)),
			mkpool("c-one", 0, []string{"198.18.3.1/32"}, priority(1)),
			mkpool("d-manual", 0, []string{"198.18.4.1/32"}, noAuto, priority(1)),
		}, steps: []step{
			{req: req("a"), want: []string{"198.18.3.1"}},
			{req: req("b"), want: []string{"198.18.2.1"}},
			{req: req("c"), want: []string{"198.18.1.1"}},
			{req: req("d"), pending: "no free IPv4 address in pool(s) c-one, b-two, a-zero"},
			{req: req("d", inPool("d-manual")), want: []string{"198.18.4.1"}},
		}},
		{name: "internal pools serve only internal Services", pools: []v1alpha1.AddressPool{
			mkpool("int", 0, []string{"198.18.1.0/31"}, internal),
			mkpool("ext", 0, []string{"198.18.2.1/32"}),
		}, steps: []step{
			{req: req("i", isInternal), want: []string{"198.18.1.0"}},
			{req: req("e"), want: []string{"198.18.2.1"}},
			{req: req("x", inPool("int")), invalid: `pool "int" is internal but the Service is not internal`},
			{req: req("y", requested("198.18.1.1")), invalid: "is internal but the Service is not internal"},
		}},
		{name: "namespace list, namespace selector and service selector", pools: []v1alpha1.AddressPool{
			mkpool("by-name", 0, []string{"198.18.1.1/32"}, namespaces("other"), priority(1)),
			mkpool("by-label", 0, []string{"198.18.2.1/32"}, nsSelector("team", "blue"), priority(2)),
			mkpool("by-svc", 0, []string{"198.18.3.1/32"}, svcSelector("tier", "web"), priority(3)),
		}, steps: []step{
			{req: req("none"), pending: "no usable IPv4 address pool"},
			{req: req("svc", func(r *Request) { r.Labels = map[string]string{"tier": "web"} }), want: []string{"198.18.3.1"}},
			{req: req("ns", func(r *Request) { r.NamespaceLabels = map[string]string{"team": "blue"} }), want: []string{"198.18.2.1"}},
			{req: req("named", inPool("by-name")), invalid: `does not serve namespace "ns"`},
			{req: req("other", func(r *Request) { r.Ref.Namespace = "other" }), want: []string{"198.18.1.1"}},
		}},
		{name: "requested addresses", pools: []v1alpha1.AddressPool{
			mkpool("p", 0, []string{"198.18.10.0/24"}, noAuto),
			mkpool("young", 10, []string{"198.18.10.128/25"}),
			mkpool("q", 0, []string{"198.18.20.0/24"}, namespaces("other")),
		}, steps: []step{
			{req: req("a", requested("198.18.10.5")), want: []string{"198.18.10.5"}},
			{req: req("b", requested("198.18.10.5")), invalid: "198.18.10.5 is held by ns/a"},
			{req: req("c", requested("198.18.30.1")), invalid: "in no address pool"},
			{req: req("d", requested("198.18.10.0")), invalid: "network or broadcast"},
			{req: req("e", requested("198.18.20.1")), invalid: `does not serve namespace`},
			{req: req("f", requested("198.18.10.1", "198.18.10.2")), invalid: "two IPv4 addresses"},
			{req: req("g", requested("2001:db8::1")), invalid: "an IPv6 address"},
			// a changes its request: it moves and the old address is free again.
			{req: req("a", requested("198.18.10.6")), want: []string{"198.18.10.6"}},
			{req: req("b", requested("198.18.10.5")), want: []string{"198.18.10.5"}},
		}},
		{name: "sharing: same key, disjoint ports", pools: small, steps: []step{
			{req: req("a", shared("k", 80)), want: []string{"198.18.10.1"}},
			{req: req("b", shared("k", 443)), want: []string{"198.18.10.1"}},
			{req: req("c", shared("k", 80)), want: []string{"198.18.10.2"}}, // port clash: another address
			{req: req("d", shared("other", 8080)), pending: "no free"},
			{req: req("e", shared("k", 80), requested("198.18.10.1")), invalid: "held by ns/a, ns/b"},
			{req: req("f", shared("k", 9090), requested("198.18.10.1")), want: []string{"198.18.10.1"}},
			{req: req("g", func(r *Request) { r.Sharing.Ports = []PortKey{{providers.TCP, 1}} }), pending: "no free"},
		}},
		{name: "sharing with externalTrafficPolicy Local needs the same selector", pools: small, steps: []step{
			{req: req("a", shared("k", 80), local("x")), want: []string{"198.18.10.1"}},
			{req: req("b", shared("k", 81), local("y")), want: []string{"198.18.10.2"}},
			{req: req("c", shared("k", 82), local("x")), want: []string{"198.18.10.1"}},
			{req: req("d", shared("k", 83)), pending: "no free"}, // Cluster cannot join a Local address
		}},
		{name: "sharing key change moves only that Service", pools: small, steps: []step{
			{req: req("a", shared("k", 80)), want: []string{"198.18.10.1"}},
			{req: req("b", shared("k", 443)), want: []string{"198.18.10.1"}},
			{req: req("b", shared("", 443)), want: []string{"198.18.10.2"}},
			{req: req("a", shared("k", 80)), want: []string{"198.18.10.1"}},
		}},
		{name: "dual stack", pools: dualPool, steps: []step{
			{req: req("a", families(dual, providers.RequireDualStack)), want: []string{"198.18.10.1", "2001:db8:10::"}},
			{req: req("b", families([]providers.IPFamily{providers.IPv6, providers.IPv4}, providers.PreferDualStack)), want: []string{"2001:db8:10::1", "198.18.10.2"}},
			{req: req("c", families(dual, providers.RequireDualStack)), pending: "no free IPv4"},
			{req: req("d", families(v6, providers.SingleStack)), pending: "no free IPv6"},
			{req: req("b"), release: true},
			{req: req("e", families(dual, providers.RequireDualStack)), pools: []v1alpha1.AddressPool{mkpool("dual", 0, []string{"198.18.10.0/30"})}, pending: "no usable IPv6"},
			{req: req("f", families(dual, providers.PreferDualStack)), want: []string{"198.18.10.2"}},
			{req: req("g", families(dual, providers.RequireDualStack), inPool("dual")), invalid: `pool "dual" has no IPv6 addresses`},
			{req: req("h", families([]providers.IPFamily{providers.IPv6, providers.IPv4}, providers.PreferDualStack)), pending: "no usable IPv6"},
			{req: req("f"), release: true},
			{req: req("h", families([]providers.IPFamily{providers.IPv6, providers.IPv4}, providers.PreferDualStack)), want: []string{"198.18.10.2"}},
		}},
		{name: "held addresses survive pool edits, conflicts and deletion", pools: small, steps: []step{
			{req: req("a"), want: []string{"198.18.10.1"}},
			{req: req("a"), pools: []v1alpha1.AddressPool{mkpool("small", 0, []string{"198.18.10.0/30"}, noAuto, namespaces("elsewhere"))}, want: []string{"198.18.10.1"}},
			{req: req("a"), pools: []v1alpha1.AddressPool{mkpool("small", 0, []string{"nonsense"})}, want: []string{"198.18.10.1"}},
			{req: req("a"), pools: []v1alpha1.AddressPool{mkpool("other", 0, []string{"198.18.11.0/30"})}, want: []string{"198.18.10.1"}},
			{req: req("b"), want: []string{"198.18.11.1"}},
		}},
		{name: "status addresses are kept only when in a pool and free", pools: small, steps: []step{
			{req: req("a", current("198.18.10.2")), want: []string{"198.18.10.2"}},
			{req: req("b", current("198.18.99.9")), want: []string{"198.18.10.1"}}, // foreign address (class change)
			{req: req("c", current("198.18.10.2")), pending: "no free"},            // held by a
		}},
		{name: "admin moves a Service to another pool; the old address is freed", pools: []v1alpha1.AddressPool{
			mkpool("old", 0, []string{"198.18.1.1/32"}),
			mkpool("new", 0, []string{"198.18.2.1/32"}, noAuto),
			mkpool("full", 0, []string{"198.18.3.1/32"}, noAuto),
		}, steps: []step{
			{req: req("x", inPool("full")), want: []string{"198.18.3.1"}},
			{req: req("a"), want: []string{"198.18.1.1"}},
			{req: req("a", inPool("full")), pending: `no free IPv4 address in pool(s) full`},
			{req: req("a"), want: []string{"198.18.1.1"}}, // kept while the move pends
			{req: req("a", inPool("new")), want: []string{"198.18.2.1"}},
			{req: req("b"), want: []string{"198.18.1.1"}},
			{req: req("c", inPool("missing")), pending: `address pool "missing" does not exist`},
		}},
		{name: "internal switch moves the Service", pools: []v1alpha1.AddressPool{
			mkpool("int", 0, []string{"198.18.1.1/32"}, internal),
			mkpool("ext", 0, []string{"198.18.2.1/32"}),
		}, steps: []step{
			{req: req("a"), want: []string{"198.18.2.1"}},
			{req: req("a", isInternal), want: []string{"198.18.1.1"}},
			{req: req("b"), want: []string{"198.18.2.1"}},
		}},
		{name: "conflicting younger pool serves nothing new", pools: []v1alpha1.AddressPool{
			mkpool("old", 0, []string{"198.18.1.1/32"}),
			mkpool("young", 5, []string{"198.18.1.0/30"}),
		}, steps: []step{
			{req: req("a"), want: []string{"198.18.1.1"}},
			{req: req("b"), pending: "no free"},
			{req: req("c", inPool("young")), pending: `overlaps older pool(s) old`},
			{req: req("d", requested("198.18.1.2")), pending: `pool "young" that holds 198.18.1.2 is not usable`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAllocator()
			pools := addresspool.Resolve(tt.pools)
			for i, s := range tt.steps {
				if s.pools != nil {
					pools = addresspool.Resolve(s.pools)
				}
				if s.release {
					a.Release(s.req.Ref)
					continue
				}
				before := snapshot(a)
				got, err := a.Assign(pools, s.req)
				var inv *providers.InvalidError
				var pend *PendingError
				switch {
				case s.invalid != "":
					if !errors.As(err, &inv) || !strings.Contains(err.Error(), s.invalid) {
						t.Fatalf("step %d (%s): got %v, %v; want InvalidError containing %q", i, s.req.Ref.Name, got, err, s.invalid)
					}
					if inv.Field == "" {
						t.Errorf("step %d: InvalidError without a field", i)
					}
				case s.pending != "":
					if !errors.As(err, &pend) || !strings.Contains(err.Error(), s.pending) {
						t.Fatalf("step %d (%s): got %v, %v; want PendingError containing %q", i, s.req.Ref.Name, got, err, s.pending)
					}
				default:
					if err != nil {
						t.Fatalf("step %d (%s): %v", i, s.req.Ref.Name, err)
					}
					if want := addrs(s.want...); !slices.Equal(got, want) {
						t.Fatalf("step %d (%s): got %v, want %v", i, s.req.Ref.Name, got, want)
					}
					continue
				}
				if after := snapshot(a); after != before {
					t.Errorf("step %d: a failed Assign changed the allocations:\n%s\n->\n%s", i, before, after)
				}
			}
		})
	}
}

func snapshot(a *Allocator) string {
	var lines []string
	for ref, h := range a.byRef {
		lines = append(lines, ref.String()+"="+stringsOf(h.ips))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func stringsOf(ips []netip.Addr) string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return strings.Join(out, " ")
}

func TestRestoreOldestWins(t *testing.T) {
	a := NewAllocator()
	a.Restore(ref("old"), addrs("198.18.10.1"), Sharing{})
	a.Restore(ref("dup"), addrs("198.18.10.1", "2001:db8::1"), Sharing{})
	a.Restore(ref("sh1"), addrs("198.18.10.2"), Sharing{Key: "k", Ports: []PortKey{{providers.TCP, 80}}})
	a.Restore(ref("sh2"), addrs("198.18.10.2"), Sharing{Key: "k", Ports: []PortKey{{providers.TCP, 81}}})
	for name, want := range map[string][]netip.Addr{
		"old": addrs("198.18.10.1"), "dup": addrs("2001:db8::1"), "sh1": addrs("198.18.10.2"), "sh2": addrs("198.18.10.2"),
	} {
		if got, _ := a.Holding(ref(name)); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", name, got, want)
		}
	}
}
