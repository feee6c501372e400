package netfilter_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/netfilter/netfiltertest"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// cluster is a CacheStore over plain indexers, filled by the test.
type cluster struct {
	services, slices, nodes cache.Indexer
	store                   *tracker.CacheStore
}

func newCluster() *cluster {
	c := &cluster{
		services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey}),
		nodes:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	c.store = tracker.NewCacheStore("node1", c.services, c.slices, c.nodes)
	return c
}

// service stores a ClusterIP Service named name at ip with one endpoint per address in eps.
func (c *cluster) service(name, ip string, eps ...string) types.NamespacedName {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	_ = c.services.Add(svc)
	c.endpoints(name, eps...)
	return types.NamespacedName{Namespace: "ns", Name: name}
}

func (c *cluster) endpoints(name string, eps ...string) {
	port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e}})
	}
	_ = c.slices.Update(s)
}

func (c *cluster) state(t *testing.T, full bool, changed ...types.NamespacedName) *tracker.State {
	t.Helper()
	m := map[types.NamespacedName]bool{}
	for _, k := range changed {
		m[k] = true
	}
	st, err := tracker.NewState(c.store, "node1", full, m)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newProxier(fake *netfiltertest.Fake) *netfilter.Proxier {
	return netfilter.New(netfilter.Options{MasqueradeBit: 12, Netfilters: map[rules.Family]netfilter.Netfilter{rules.IPv4: fake}})
}

// writtenChains names the chains a restore input declares.
func writtenChains(input []byte) []string {
	var out []string
	for _, l := range strings.Split(string(input), "\n") {
		if name, ok := strings.CutPrefix(l, ":"); ok {
			out = append(out, strings.Fields(name)[0])
		}
	}
	slices.Sort(out)
	return out
}

func TestFullThenPartialSync(t *testing.T) {
	ctx := context.Background()
	c := newCluster()
	web := c.service("web", "198.18.0.10", "198.19.1.2")
	c.service("db", "198.18.0.11", "198.19.1.3")
	fake := netfiltertest.New()
	p := newProxier(fake)

	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	if restores, saves := fake.Calls(); restores != 1 || saves != 1 {
		t.Fatalf("first (full) sync: %d restores, %d saves; want 1, 1", restores, saves)
	}
	if rs, _ := fake.Chain(rules.TableNAT, "PTC-SVC-0A"); len(rs) != 1 || !strings.Contains(rs[0], "--to-destination 198.19.1.2:8080") {
		t.Errorf("bucket of 198.18.0.10: %q", rs)
	}
	for _, j := range rules.Jumps() {
		if rs, _ := fake.Chain(j.Table, j.Chain); !slices.Contains(rs, strings.Join(j.Spec, " ")) {
			t.Errorf("jump missing in %s/%s: %q", j.Table, j.Chain, rs)
		}
	}

	// One endpoint of web changes: a partial sync rewrites web's bucket only, without reading
	// the kernel.
	c.endpoints("web", "198.19.1.9")
	if err := p.Sync(ctx, c.state(t, false, web)); err != nil {
		t.Fatal(err)
	}
	restores, saves := fake.Calls()
	if restores != 2 || saves != 1 {
		t.Fatalf("partial sync: %d restores, %d saves; want 2, 1", restores, saves)
	}
	if got := writtenChains(fake.Restores[1]); !slices.Equal(got, []string{"PTC-SVC-0A"}) {
		t.Errorf("partial sync wrote %v, want only PTC-SVC-0A", got)
	}
	if rs, _ := fake.Chain(rules.TableNAT, "PTC-SVC-0A"); len(rs) != 1 || !strings.Contains(rs[0], "198.19.1.9:8080") {
		t.Errorf("bucket after the change: %q", rs)
	}

	// A full sync without drift reads the kernel and writes nothing.
	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	if restores, saves := fake.Calls(); restores != 2 || saves != 2 {
		t.Errorf("full sync without drift: %d restores, %d saves; want 2 (none new), 2", restores, saves)
	}
}

// TestDriftRepair: a partial sync trusts what it last applied; a full sync compares with the
// kernel and rewrites exactly the drifted chains and the missing jumps.
func TestDriftRepair(t *testing.T) {
	ctx := context.Background()
	c := newCluster()
	web := c.service("web", "198.18.0.10", "198.19.1.2")
	c.service("db", "198.18.0.11", "198.19.1.3")
	fake := netfiltertest.New()
	p := newProxier(fake)
	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	// Someone flushes db's bucket, adds a stray owned chain and deletes the PREROUTING jump.
	fake.SetChain(rules.TableNAT, "PTC-SVC-0B", []string{})
	fake.SetChain(rules.TableNAT, "PTC-STRAY", []string{"-j RETURN"})
	pre := rules.Jumps()[0]
	if err := fake.DeleteJump(pre); err != nil {
		t.Fatal(err)
	}

	if err := p.Sync(ctx, c.state(t, false, web)); err != nil {
		t.Fatal(err)
	}
	if rs, _ := fake.Chain(rules.TableNAT, "PTC-SVC-0B"); len(rs) != 0 {
		t.Errorf("a partial sync repaired drift it cannot see: %q", rs)
	}

	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	last := fake.Restores[len(fake.Restores)-1]
	if got := writtenChains(last); !slices.Equal(got, []string{"PTC-STRAY", "PTC-SVC-0B"}) {
		t.Errorf("full sync wrote %v, want the flushed bucket and the stray chain (deleted)", got)
	}
	if _, ok := fake.Chain(rules.TableNAT, "PTC-STRAY"); ok {
		t.Error("stray owned chain not deleted")
	}
	if rs, _ := fake.Chain(rules.TableNAT, "PTC-SVC-0B"); len(rs) != 1 {
		t.Errorf("flushed bucket not rewritten: %q", rs)
	}
	if rs, _ := fake.Chain(pre.Table, pre.Chain); !slices.Contains(rs, strings.Join(pre.Spec, " ")) {
		t.Error("deleted jump not re-inserted")
	}
}

// TestRestoreFailureMakesTheFamilyFull: after a failed restore the kernel's state is unknown, so
// the next sync of the family is full even when the loop asks for a partial one.
func TestRestoreFailureMakesTheFamilyFull(t *testing.T) {
	ctx := context.Background()
	c := newCluster()
	web := c.service("web", "198.18.0.10", "198.19.1.2")
	fake := netfiltertest.New()
	var outcomes []error
	p := netfilter.New(netfilter.Options{MasqueradeBit: 12,
		Netfilters:   map[rules.Family]netfilter.Netfilter{rules.IPv4: fake},
		FamilySynced: func(_ rules.Family, err error) { outcomes = append(outcomes, err) }})
	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	c.endpoints("web", "198.19.1.9")
	fake.FailRestores = 1
	if err := p.Sync(ctx, c.state(t, false, web)); !errors.Is(err, netfiltertest.ErrInjected) {
		t.Fatalf("sync with a failing restore: %v, want the injected error", err)
	}
	if len(outcomes) != 2 || outcomes[0] != nil || !errors.Is(outcomes[1], netfiltertest.ErrInjected) {
		t.Errorf("family outcomes %v, want nil then the failure", outcomes)
	}
	_, saves := fake.Calls()
	if err := p.Sync(ctx, c.state(t, false)); err != nil {
		t.Fatal(err)
	}
	if _, s := fake.Calls(); s != saves+1 {
		t.Errorf("the sync after a failure did not read the kernel (full sync): saves %d -> %d", saves, s)
	}
	if rs, _ := fake.Chain(rules.TableNAT, "PTC-SVC-0A"); len(rs) != 1 || !strings.Contains(rs[0], "198.19.1.9:8080") {
		t.Errorf("the full sync did not program the change the failed one carried: %q", rs)
	}
}

func TestHealthCheckAddresses(t *testing.T) {
	fake := netfiltertest.New()
	p := newProxier(fake)
	if got := p.HealthCheckAddresses(); got != nil {
		t.Errorf("unrestricted NodePorts: %v, want nil (every address)", got)
	}
	p = netfilter.New(netfilter.Options{MasqueradeBit: 12, NodePortCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.255.254/32")}, // no local address in it
		Netfilters: map[rules.Family]netfilter.Netfilter{rules.IPv4: fake}})
	c := newCluster()
	if err := p.Sync(context.Background(), c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	if got := p.HealthCheckAddresses(); got == nil || len(got) != 0 {
		t.Errorf("restricted to no local address: %v, want none (not nil)", got)
	}
}

// TestSetFamilies: a family added is programmed (full) at the next sync and its health-check
// addresses join; one that cannot be set up changes nothing; a family dropped has its chains
// and jumps removed at the next sync, the other family's kept.
func TestSetFamilies(t *testing.T) {
	ctx := context.Background()
	ip4, ip6 := netfiltertest.New(), netfiltertest.New()
	fail := true
	p := netfilter.New(netfilter.Options{MasqueradeBit: 12,
		NodePortCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.255.254/32")}, // IPv4 restricted to no local address
		Netfilters:    map[rules.Family]netfilter.Netfilter{rules.IPv4: ip4},
		NewNetfilter: func(rules.Family) (netfilter.Netfilter, error) {
			if fail {
				return nil, errors.New("no ip6tables")
			}
			return ip6, nil
		}})
	c := newCluster()
	c.service("web", "198.18.0.10", "198.19.1.2")
	if err := p.Sync(ctx, c.state(t, true)); err != nil {
		t.Fatal(err)
	}
	if got := p.HealthCheckAddresses(); got == nil || len(got) != 0 {
		t.Fatalf("IPv4 restricted to no local address: %v, want none", got)
	}
	both := []rules.Family{rules.IPv4, rules.IPv6}
	if err := p.SetFamilies(both); err == nil || !strings.Contains(err.Error(), "no ip6tables") {
		t.Fatalf("SetFamilies without ip6tables: %v", err)
	}
	if got := p.Families(); !slices.Equal(got, []rules.Family{rules.IPv4}) {
		t.Fatalf("families after a failed SetFamilies: %v", got)
	}
	fail = false
	if err := p.SetFamilies(both); err != nil {
		t.Fatal(err)
	}
	// A partial sync: the new family's first one is full all the same.
	if err := p.Sync(ctx, c.state(t, false)); err != nil {
		t.Fatal(err)
	}
	if rs, ok := ip6.Chain(rules.TableNAT, "PTC-SERVICES"); !ok || len(rs) == 0 {
		t.Errorf("IPv6 not programmed after SetFamilies: PTC-SERVICES %q", rs)
	}
	if got := p.HealthCheckAddresses(); !slices.Equal(got, []netip.Addr{netip.IPv6Unspecified()}) {
		t.Errorf("health-check addresses with IPv6 (unrestricted) added: %v, want [::]", got)
	}
	if err := p.SetFamilies([]rules.Family{rules.IPv4}); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx, c.state(t, false)); err != nil {
		t.Fatal(err)
	}
	saved, _ := ip6.Save(ctx)
	if owned := saved.OwnedChains(); len(owned[rules.TableNAT])+len(owned[rules.TableFilter]) != 0 {
		t.Errorf("IPv6 chains left after the family was dropped: %v", owned)
	}
	for _, j := range rules.Jumps() {
		if saved.HasJump(j) {
			t.Errorf("IPv6 jump left: %v", j)
		}
	}
	if _, ok := ip4.Chain(rules.TableNAT, "PTC-SERVICES"); !ok {
		t.Error("the IPv4 chains went too")
	}
	if got := p.HealthCheckAddresses(); got == nil || len(got) != 0 {
		t.Errorf("health-check addresses after IPv6 was dropped: %v, want none", got)
	}
}
