//go:build e2e

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gnft "github.com/google/nftables"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// inNetns runs the test's goroutine in a new named network namespace until it ends.
func inNetns(t *testing.T) string {
	t.Helper()
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.NFTables)
	name := fmt.Sprintf("portico-nft-%d", os.Getpid())
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Set(orig)
		_ = ns.Close()
		_ = netns.DeleteNamed(name)
		runtime.UnlockOSThread()
	})
	return name
}

type store struct {
	services, slices, nodes cache.Indexer
	*tracker.CacheStore
}

func newStore() *store {
	s := &store{
		services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		slices:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey}),
		nodes:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	s.CacheStore = tracker.NewCacheStore("node1", s.services, s.slices, s.nodes)
	return s
}

func (s *store) service(name, ip string, mutate func(*corev1.Service), eps ...string) types.NamespacedName {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if mutate != nil {
		mutate(svc)
	}
	_ = s.services.Update(svc)
	port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		node := "node2"
		if strings.HasPrefix(e, "local:") {
			e, node = strings.TrimPrefix(e, "local:"), "node1"
		}
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{e}, NodeName: &node})
	}
	_ = s.slices.Update(sl)
	return types.NamespacedName{Namespace: "ns", Name: name}
}

func ptr[T any](v T) *T { return &v }

func nft(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestProgramsTable: a full sync writes the table with every kind of Service, a partial sync
// changes only what changed, a later full sync repairs a deleted chain, and Cleanup removes
// the table. The kernel accepting the transaction is the main check; packets are the dataplane
// suite's.
func TestProgramsTable(t *testing.T) {
	ns := inNetns(t)
	s := newStore()
	web := s.service("web", "198.18.10.1", nil, "198.19.1.1", "198.19.1.2", "local:198.19.0.5")
	s.service("lb", "198.18.10.2", func(svc *corev1.Service) {
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Spec.Ports[0].NodePort = 30080
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.LoadBalancerSourceRanges = []string{"198.18.200.0/24"}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.128.1"}}
	}, "198.19.1.1", "local:198.19.0.5")
	sticky := s.service("sticky", "198.18.10.4", func(svc *corev1.Service) {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}}
	}, "198.19.1.1", "198.19.1.2")
	s.service("empty", "198.18.10.3", func(svc *corev1.Service) {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = 30081
	})
	p := nftables.New(nftables.Options{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}, MasqueradeBit: 12,
		Families: []rules.Family{rules.IPv4}})
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	sync := func(full bool, changed ...types.NamespacedName) {
		t.Helper()
		all, _ := s.Services()
		if full {
			changed = all
		}
		if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: full, Changed: changed, Store: s}); err != nil {
			t.Fatal(err)
		}
	}
	sync(true)
	out := nft(t, ns, "list", "table", "ip", "portico")
	t.Log(out)
	for _, want := range []string{"198.18.10.1 . tcp . 80 : goto int-ns/web/tcp/http", "numgen random mod 3", "tcp . 30080 : goto ext-ns/lb/tcp/http",
		"198.18.128.1 . tcp . 80 : goto fw-ns/lb/tcp/http", "198.18.10.3 . tcp . 80 : goto reject", "masquerade"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Affinity: a dynamic set per endpoint, kept by a full sync, gone with its endpoint.
	affMaps := func() []string {
		var out []string
		for _, l := range strings.Split(nft(t, ns, "list", "sets", "ip"), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "set" && strings.HasPrefix(f[1], "aff-int-ns/sticky/") {
				out = append(out, f[1])
			}
		}
		slices.Sort(out)
		return out
	}
	before := affMaps()
	if len(before) != 2 || !strings.Contains(out, "update @"+before[0]) {
		t.Errorf("affinity maps %v; table:\n%s", before, out)
	}
	sync(true)
	if after := affMaps(); !slices.Equal(after, before) {
		t.Errorf("a full sync replaced the affinity map %v with %v", before, after)
	}
	s.service("sticky", "198.18.10.4", func(svc *corev1.Service) {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}}
	}, "198.19.1.1", "198.19.1.3")
	sync(false, sticky)
	kept := 0
	after := affMaps()
	for _, a := range after {
		if slices.Contains(before, a) {
			kept++
		}
	}
	if len(after) != 2 || kept != 1 {
		t.Errorf("after an endpoint change the affinity sets are %v (before: %v), want the kept endpoint's and a new one", after, before)
	}

	// One endpoint less: a partial sync.
	s.service("web", "198.18.10.1", nil, "198.19.1.1", "local:198.19.0.5")
	sync(false, web)
	out = nft(t, ns, "list", "chain", "ip", "portico", "int-ns/web/tcp/http")
	if !strings.Contains(out, "numgen random mod 2") {
		t.Errorf("partial sync did not rewrite the chain:\n%s", out)
	}
	// Drift: a chain flushed by hand comes back on the next full sync.
	nft(t, ns, "flush", "chain", "ip", "portico", "int-ns/web/tcp/http")
	sync(true)
	if out := nft(t, ns, "list", "chain", "ip", "portico", "int-ns/web/tcp/http"); !strings.Contains(out, "numgen random mod 2") {
		t.Errorf("full sync did not repair the chain:\n%s", out)
	}
	// A Service gone.
	_ = s.services.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	sync(false, web)
	if out := nft(t, ns, "list", "table", "ip", "portico"); strings.Contains(out, "ns/web") {
		t.Errorf("deleted Service still in the table:\n%s", out)
	}
	if err := nftables.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if out := nft(t, ns, "list", "tables"); strings.Contains(out, "portico") {
		t.Errorf("table left after Cleanup: %s", out)
	}
}

// TestRefusedBatch: a batch the kernel refuses (a partial sync deleting what someone else
// already deleted) fails the sync with the kernel's error, changes nothing, and the next (full)
// sync repairs the table over the same connections.
func TestRefusedBatch(t *testing.T) {
	ns := inNetns(t)
	s := newStore()
	web := s.service("web", "198.18.10.1", nil, "198.19.1.1", "198.19.1.2")
	s.service("api", "198.18.10.2", nil, "198.19.1.3")
	p := nftables.New(nftables.Options{MasqueradeBit: 12, Families: []rules.Family{rules.IPv4}})
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	all, _ := s.Services()
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
		t.Fatal(err)
	}
	nft(t, ns, "delete", "element", "ip", "portico", "service-ips", "{ 198.18.10.1 . tcp . 80 }")
	nft(t, ns, "delete", "chain", "ip", "portico", "int-ns/web/tcp/http")
	_ = s.services.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	s.service("api", "198.18.10.2", nil, "198.19.1.4")
	err := p.Sync(ctx, &tracker.State{NodeName: "node1", Changed: []types.NamespacedName{web, {Namespace: "ns", Name: "api"}}, Store: s})
	if err == nil || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("partial sync deleting a deleted chain: %v, want ENOENT", err)
	}
	if out := nft(t, ns, "list", "chain", "ip", "portico", "int-ns/api/tcp/http"); !strings.Contains(out, "198.19.1.3") {
		t.Errorf("a refused batch changed the table:\n%s", out)
	}
	all, _ = s.Services()
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
		t.Fatal(err)
	}
	out := nft(t, ns, "list", "table", "ip", "portico")
	if !strings.Contains(out, "198.19.1.4") || strings.Contains(out, "ns/web") {
		t.Errorf("the full sync after a refused batch did not repair the table:\n%s", out)
	}
}

// BenchmarkPartialSync: one endpoint of one of 1,000 (and 10,000) Services x 10 endpoints
// changes; a partial sync rewrites that Service's chain only.
func BenchmarkPartialSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchPartialSync(b, n) })
	}
}

func benchPartialSync(b *testing.B, services int) {
	prereq.RequireRoot(b, prereq.IPRoute2, prereq.NFTables)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, _ := netns.Get()
	ns, err := netns.New()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = netns.Set(orig); _ = ns.Close() }()
	s := newStore()
	var keys []types.NamespacedName
	for i := range services {
		var eps []string
		for j := range 10 {
			k := i*10 + j
			eps = append(eps, fmt.Sprintf("198.19.%d.%d", 128+k/250%127, k%250+1))
		}
		keys = append(keys, s.service(fmt.Sprintf("s%05d", i), fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), nil, eps...))
	}
	p := nftables.New(nftables.Options{MasqueradeBit: 12, Families: []rules.Family{rules.IPv4}})
	defer func() { _ = p.Close() }()
	ctx := context.Background()
	all, _ := s.Services()
	start := time.Now()
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
		b.Fatal(err)
	}
	full := time.Since(start)
	floor := commitFloor(b)
	b.ResetTimer()
	for i := range b.N {
		eps := []string{"198.19.1.1", "198.19.1.2", fmt.Sprintf("198.19.2.%d", i%250+1)}
		s.service("s00000", "198.18.0.1", nil, eps...)
		if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Changed: keys[:1], Store: s}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(full.Microseconds())/1000, "full-ms")
	b.ReportMetric(floor, "element-commit-ms")
}

// BenchmarkFullSync: the first (full) sync of 1,000 (and 10,000) Services x 10 endpoints into a
// fresh network namespace, as the agent's first sync at start (what e2e/suites/dataplane's
// BenchmarkSync reports as the full sync, without the informers).
func BenchmarkFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchFullSync(b, n) })
	}
}

func benchFullSync(b *testing.B, services int) {
	prereq.RequireRoot(b, prereq.IPRoute2, prereq.NFTables)
	s := benchStore(services)
	all, _ := s.Services()
	ctx := context.Background()
	ownNetns := os.Getenv(ownNetnsEnv) != ""
	var orig netns.NsHandle
	if !ownNetns {
		// The goroutine stays on its thread, which is in the benchmark's namespace: slower
		// than the agent, whose every thread is in its node's namespace (each wait for an
		// answer hands the thread over).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, _ = netns.Get()
		defer func() { _ = netns.Set(orig) }()
	}
	var user, sys time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var ns netns.NsHandle
		if ownNetns {
			if err := nftables.Cleanup(ctx); err != nil {
				b.Fatal(err)
			}
		} else {
			var err error
			if ns, err = netns.New(); err != nil {
				b.Fatal(err)
			}
		}
		p := nftables.New(nftables.Options{MasqueradeBit: 12, Families: []rules.Family{rules.IPv4}})
		u0, s0 := cpuTimes()
		b.StartTimer()
		if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		u1, s1 := cpuTimes()
		user, sys = user+u1-u0, sys+s1-s0
		_ = p.Close()
		if !ownNetns {
			_ = netns.Set(orig)
			_ = ns.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(user.Milliseconds())/float64(b.N), "user-ms/op")
	b.ReportMetric(float64(sys.Milliseconds())/float64(b.N), "sys-ms/op")
}

// ownNetnsEnv tells BenchmarkFullSync that the process runs in a network namespace of its own
// (unshare -n): it syncs from any thread, as the agent does, and deletes the table between
// iterations.
const ownNetnsEnv = "PORTICO_NFT_BENCH_OWN_NETNS"

// cpuTimes is the process's user and system CPU time so far (all threads: the garbage
// collector's too, and the kernel's work on the netlink batch, done in the sending thread).
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// benchStore holds services ClusterIP Services with 10 remote endpoints each, as BenchmarkSync's.
func benchStore(services int) *store {
	s := newStore()
	for i := range services {
		var eps []string
		for j := range 10 {
			k := i*10 + j
			eps = append(eps, fmt.Sprintf("198.19.%d.%d", 128+k/250%127, k%250+1))
		}
		s.service(fmt.Sprintf("s%05d", i), fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), nil, eps...)
	}
	return s
}

// commitFloor is the mean time of a transaction that only adds and deletes one element of a set
// without verdicts (the hairpin set) in the loaded table: the kernel's cost of a commit that
// needs no validation of the jump graph, to compare with a partial sync.
func commitFloor(b *testing.B) float64 {
	// A kept connection, as the Proxier's: closing one waits for the freeing of what the
	// commit deleted.
	c, err := gnft.New(gnft.AsLasting())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.CloseLasting() }()
	set := &gnft.Set{Table: &gnft.Table{Name: nftables.TableName, Family: gnft.TableFamilyIPv4}, Name: "hairpin"}
	elem := []gnft.SetElement{{Key: []byte{198, 19, 9, 9, 198, 19, 9, 9}}}
	start := time.Now()
	const n = 20
	for range n {
		if err := c.SetAddElements(set, elem); err != nil {
			b.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := c.SetDeleteElements(set, elem); err != nil {
			b.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / (2 * n)
}

// Probe succeeds on this kernel and leaves no table behind (it creates and deletes its table in
// one transaction).
func TestProbe(t *testing.T) {
	inNetns(t)
	if err := nftables.Probe(); err != nil {
		t.Fatal(err)
	}
	c, err := gnft.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		t.Errorf("table %s left behind", tb.Name)
	}
}

// TestPartialSyncsOfEveryKind (issue 31 item 12): each kind of Service (traffic policies
// Cluster and Local, external and internal; affinity; source ranges; NodePort, LoadBalancer,
// externalIPs, healthCheckNodePort; no endpoints, no local endpoint) is created, changed and
// deleted by partial syncs, every one of which the kernel accepts. Deleting an
// externalTrafficPolicy: Local port once deleted its clu- chain before the ext- chain's jump
// to it went: EBUSY, and a full sync in its place.
func TestPartialSyncsOfEveryKind(t *testing.T) {
	inNetns(t)
	s := newStore()
	lb := func(ip string, port int32) func(*corev1.Service) {
		return func(svc *corev1.Service) {
			svc.Spec.Type = corev1.ServiceTypeLoadBalancer
			svc.Spec.Ports[0].NodePort = port
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
	}
	etpLocal := func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = 32000
	}
	itpLocal := func(svc *corev1.Service) {
		p := corev1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &p
	}
	affinity := func(svc *corev1.Service) {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}}
	}
	ranges := func(svc *corev1.Service) { svc.Spec.LoadBalancerSourceRanges = []string{"198.18.200.0/24"} }
	extIPs := func(svc *corev1.Service) { svc.Spec.ExternalIPs = []string{"198.18.130.1"} }
	nodePort := func(svc *corev1.Service) {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = 30090
	}
	all := func(ms ...func(*corev1.Service)) func(*corev1.Service) {
		return func(svc *corev1.Service) {
			for _, m := range ms {
				m(svc)
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(*corev1.Service)
		eps    []string
	}{
		{"clusterip", nil, []string{"198.19.1.1", "198.19.1.2"}},
		{"nodeport", nodePort, []string{"198.19.1.1"}},
		{"lb-cluster", lb("198.18.128.1", 30091), []string{"198.19.1.1", "local:198.19.0.5"}},
		{"lb-local", all(lb("198.18.128.2", 30092), etpLocal), []string{"198.19.1.1", "local:198.19.0.5"}},
		{"lb-local-remote", all(lb("198.18.128.3", 30093), etpLocal), []string{"198.19.1.1"}},
		{"lb-local-ranges-affinity", all(lb("198.18.128.4", 30094), etpLocal, ranges, affinity, extIPs), []string{"198.19.1.1", "local:198.19.0.5"}},
		{"lb-ranges", all(lb("198.18.128.5", 30095), ranges), []string{"198.19.1.1"}},
		{"itp-local", itpLocal, []string{"198.19.1.1", "local:198.19.0.5"}},
		{"itp-local-remote", all(itpLocal, affinity), []string{"198.19.1.1"}},
		{"affinity", affinity, []string{"198.19.1.1", "198.19.1.2"}},
		{"externalips", extIPs, []string{"198.19.1.1"}},
		{"empty", lb("198.18.128.6", 30096), nil},
	}
	p := nftables.New(nftables.Options{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}, MasqueradeBit: 12,
		Families: []rules.Family{rules.IPv4}})
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	// A full sync first (the agent's at start), with one Service the others' changes leave alone.
	s.service("stays", "198.18.10.99", nil, "198.19.1.9")
	first, _ := s.Services()
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: first, Store: s}); err != nil {
		t.Fatal(err)
	}
	partial := func(what string, key types.NamespacedName) {
		t.Helper()
		if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Changed: []types.NamespacedName{key}, Store: s}); err != nil {
			t.Errorf("%s: partial sync: %v", what, err)
			// The agent's answer: a full sync, so the next case starts from a known table.
			all, _ := s.Services()
			if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, c := range cases {
		ip := fmt.Sprintf("198.18.10.%d", i+1)
		key := s.service(c.name, ip, c.mutate, c.eps...)
		partial("create "+c.name, key)
		// A change: another endpoint, then the kind's policies undone (a rewrite of every chain).
		s.service(c.name, ip, c.mutate, append(slices.Clone(c.eps), "198.19.1.7")...)
		partial("add an endpoint to "+c.name, key)
		s.service(c.name, ip, nil, c.eps...)
		partial("reset "+c.name+" to a plain ClusterIP", key)
		s.service(c.name, ip, c.mutate, c.eps...)
		partial("make "+c.name+" again", key)
		_ = s.services.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: c.name}})
		partial("delete "+c.name, key)
	}
}
