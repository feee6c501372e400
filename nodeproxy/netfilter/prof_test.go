//go:build e2e

package netfilter

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// profEnv enables TestProfScale: the agent's sync at 10,000 Services x 10 endpoints against a
// real iptables in a scratch network namespace (root only; never part of `make test`).
// PORTICO_PROF_SERVICES overrides the number of Services.
const profEnv = "PORTICO_PROF"

const profNetnsEnv = "PORTICO_PROF_NETNS"

// TestProfScale reproduces the bench-scale figures without an apiserver: it re-runs itself
// inside a fresh network namespace, fills listers with the bench's objects and times the
// agent's first full sync (both families, as on a dual-stack node), a one-endpoint partial
// sync, and a second full sync without drift. Use -cpuprofile for the Go side (the profile of
// the run inside the namespace is written to FILE.netns). Run:
//
//	sudo PORTICO_PROF=1 go test -tags e2e -run '^TestProfScale$' -v -cpuprofile /tmp/cpu.out ./nodeproxy/netfilter/
func TestProfScale(t *testing.T) {
	if os.Getenv(profEnv) == "" {
		t.Skip("set " + profEnv + "=1 (root) to run")
	}
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables)
	if os.Getenv(profNetnsEnv) == "" {
		ns := fmt.Sprintf("ptprof-%d", os.Getpid())
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add: %v: %s", err, out)
		}
		defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
		_ = exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").Run()
		args := []string{"netns", "exec", ns, os.Args[0]}
		for _, a := range os.Args[1:] {
			// This process writes its own (empty) profile last: the child's gets another name.
			if v, ok := strings.CutPrefix(a, "-test.cpuprofile="); ok {
				a = "-test.cpuprofile=" + v + ".netns"
			}
			args = append(args, a)
		}
		cmd := exec.Command("ip", args...)
		cmd.Env = append(os.Environ(), profNetnsEnv+"="+ns)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("inside %s: %v", ns, err)
		}
		return
	}
	// Inside the namespace from here on.
	n := 10000
	if v := os.Getenv("PORTICO_PROF_SERVICES"); v != "" {
		fmt.Sscan(v, &n)
	}
	svcIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	sliceIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, tracker.SliceServiceIndex: tracker.SliceServiceKey})
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	const ns = "bench"
	var firstSlice *discoveryv1.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("s%05d", i)
		ip := netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(i%250 + 1)})
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: ip.String(), ClusterIPs: []string{ip.String()},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		_ = svcIdx.Add(svc)
		port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
		node, ready := "elsewhere", true
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "portico-bench",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		}
		for j := range 10 {
			k := i*10 + j
			a := netip.AddrFrom4([4]byte{198, 19, byte(128 + k/250%127), byte(k%250 + 1)})
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{a.String()}, NodeName: &node,
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			})
		}
		_ = sliceIdx.Add(slice)
		if i == 0 {
			firstSlice = slice
		}
	}
	store := tracker.NewCacheStore("node3", svcIdx, sliceIdx, nodeIdx)
	m := NewMetrics(prometheus.NewRegistry())
	ctx := context.Background()
	var proxiers []*familyProxier
	for _, fam := range []rules.Family{rules.IPv4, rules.IPv6} {
		bin := "iptables"
		cidr := "198.19.128.0/17"
		if fam == rules.IPv6 {
			bin, cidr = "ip6tables", "fd00:c613:ff:100::/56"
		}
		nf, err := NewExec(fam, bin)
		if err != nil {
			t.Fatal(err)
		}
		proxiers = append(proxiers, &familyProxier{FamilyState: &FamilyState{Family: fam, ct: NetlinkConntrack{}, metrics: m.family}, nf: &timedNetfilter{Netfilter: nf, t: t, fam: fam}, metrics: m,
			baseCfg: rules.Config{Family: fam, MasqueradeMark: 1 << 12, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix(cidr)}}})
	}
	all, err := store.Services()
	if err != nil {
		t.Fatal(err)
	}
	state := func(keys []types.NamespacedName, full bool) *tracker.State {
		return &tracker.State{NodeName: "node3", Node: store.Node(), Full: full, Changed: keys, Store: store}
	}
	run := func(what string, keys []types.NamespacedName, full bool) {
		start := time.Now()
		for _, p := range proxiers {
			ps := time.Now()
			res, err := p.sync(ctx, state(keys, full))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %s (full=%v chainsWritten=%d nat=%d filter=%d)", what, p.Family, time.Since(ps).Round(time.Millisecond), res.full, res.chainsWritten, res.nat, res.filt)
		}
		t.Logf("%s total: %s", what, time.Since(start).Round(time.Millisecond))
	}
	run("first full sync", all, true)

	// One endpoint moves, as changeOneEndpoint does.
	s := firstSlice.DeepCopy()
	s.Endpoints[len(s.Endpoints)-1].Addresses = []string{"198.19.255.1"}
	_ = sliceIdx.Update(s)
	run("one-endpoint sync", []types.NamespacedName{{Namespace: ns, Name: firstSlice.Name}}, false)
	run("second full sync", all, true)

	// More one-endpoint syncs, for a steadier figure (PORTICO_PROF_PARTIALS, default 10).
	reps := 10
	if v := os.Getenv("PORTICO_PROF_PARTIALS"); v != "" {
		fmt.Sscan(v, &reps)
	}
	var sum time.Duration
	for i := range reps {
		s := s.DeepCopy()
		s.Endpoints[len(s.Endpoints)-1].Addresses = []string{fmt.Sprintf("198.19.254.%d", i%250+1)}
		_ = sliceIdx.Update(s)
		start := time.Now()
		for _, p := range proxiers {
			if _, err := p.sync(ctx, state([]types.NamespacedName{{Namespace: ns, Name: firstSlice.Name}}, false)); err != nil {
				t.Fatal(err)
			}
		}
		sum += time.Since(start)
	}
	if reps > 0 {
		t.Logf("one-endpoint sync, mean of %d: %s", reps, (sum / time.Duration(reps)).Round(100*time.Microsecond))
	}
	// The kernel's floor: a commit adding one rule to a chain nothing jumps to still has
	// nf_tables validate every rule reachable from the base chains.
	one := []byte("*nat\n:PTC-PROF-FLOOR - [0:0]\n-A PTC-PROF-FLOOR -d 198.18.255.1/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 198.19.255.1:80\nCOMMIT\n")
	empty := []byte("*nat\n:PTC-PROF-FLOOR - [0:0]\nCOMMIT\n")
	for _, in := range []struct {
		what  string
		input []byte
	}{{"one-rule commit", one}, {"rule-less commit", empty}} {
		var total time.Duration
		for range 5 {
			start := time.Now()
			if err := proxiers[0].nf.(*timedNetfilter).Netfilter.Restore(ctx, in.input); err != nil {
				t.Fatal(err)
			}
			total += time.Since(start)
		}
		t.Logf("kernel floor, %s (IPv4, mean of 5): %s", in.what, (total / 5).Round(100*time.Microsecond))
	}
	// The Go side of a partial sync alone: Ruleset and RestoreInput with nothing changed.
	p4 := proxiers[0]
	start := time.Now()
	for range 20 {
		rules.RestoreInput(p4.applied, p4.builder.Ruleset(), nil)
	}
	t.Logf("Ruleset+RestoreInput (IPv4, no change): %s", (time.Since(start) / 20).Round(10*time.Microsecond))
}

// timedNetfilter logs how long each iptables call takes.
type timedNetfilter struct {
	Netfilter
	t   *testing.T
	fam rules.Family
	// restores counts Restore calls (file names of PORTICO_PROF_DUMP).
	restores int
}

func (n *timedNetfilter) Restore(ctx context.Context, input []byte) error {
	if dir := os.Getenv("PORTICO_PROF_DUMP"); dir != "" {
		n.restores++
		_ = os.WriteFile(fmt.Sprintf("%s/restore-%s-%d.txt", dir, n.fam, n.restores), input, 0o644)
	}
	start := time.Now()
	err := n.Netfilter.Restore(ctx, input)
	n.t.Logf("  %s restore: %d bytes, %d lines: %s", n.fam, len(input), strings.Count(string(input), "\n"), time.Since(start).Round(time.Millisecond))
	return err
}

func (n *timedNetfilter) Save(ctx context.Context) (rules.Saved, error) {
	start := time.Now()
	s, err := n.Netfilter.Save(ctx)
	n.t.Logf("  %s save+parse: %s", n.fam, time.Since(start).Round(time.Millisecond))
	return s, err
}

func (n *timedNetfilter) EnsureJump(j rules.Jump) error {
	start := time.Now()
	err := n.Netfilter.EnsureJump(j)
	n.t.Logf("  %s ensure jump %s/%s: %s", n.fam, j.Table, j.Chain, time.Since(start).Round(time.Millisecond))
	return err
}
