package rules

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var (
	ip  = netip.MustParseAddr
	pfx = netip.MustParsePrefix
)

func cfg4() Config {
	return Config{
		Family:         IPv4,
		MasqueradeMark: 0x1000,
		ClusterCIDRs:   []netip.Prefix{pfx("198.19.1.0/24"), pfx("198.19.2.0/24")},
	}
}

func ep(addr string, port uint16, local bool) Endpoint {
	return Endpoint{IP: ip(addr), Port: port, Ready: true, Serving: true, Local: local}
}

// scenario is a mix of every feature, after kube-proxy's overall-rules test: the file names of the
// golden files say which case each service covers.
func scenario() []*ServicePort {
	return []*ServicePort{
		{Namespace: "ns1", Name: "clusterip", PortName: "p80", Protocol: "tcp", ClusterIP: ip("198.18.0.41"), Port: 80,
			Endpoints: []Endpoint{ep("198.19.1.2", 8080, true), ep("198.19.2.2", 8080, false), ep("198.19.2.3", 8080, false)}},
		{Namespace: "ns2", Name: "lb-local", PortName: "p80", Protocol: "tcp", ClusterIP: ip("198.18.0.42"), Port: 80, NodePort: 30042,
			ExternalIPs: []netip.Addr{ip("198.18.130.1")}, LoadBalancerIPs: []netip.Addr{ip("198.18.128.42")},
			ExternalLocal: true, HealthCheckNodePort: 30000,
			Endpoints: []Endpoint{ep("198.19.2.4", 8080, false)}},
		{Namespace: "ns3", Name: "nodeport", PortName: "", Protocol: "udp", ClusterIP: ip("198.18.0.43"), Port: 53, NodePort: 30053,
			Endpoints: []Endpoint{ep("198.19.1.3", 5353, true)}},
		{Namespace: "ns4", Name: "lb-ranges", PortName: "https", Protocol: "tcp", ClusterIP: ip("198.18.0.44"), Port: 443, NodePort: 30443,
			LoadBalancerIPs: []netip.Addr{ip("198.18.128.44")}, SourceRanges: []netip.Prefix{pfx("198.19.0.101/32"), pfx("198.19.100.0/25")},
			AffinitySeconds: 10800,
			Endpoints:       []Endpoint{ep("198.19.1.4", 8443, true), ep("198.19.2.5", 8443, false)}},
		{Namespace: "ns5", Name: "empty", PortName: "p80", Protocol: "tcp", ClusterIP: ip("198.18.0.45"), Port: 80, NodePort: 30045},
		{Namespace: "ns6", Name: "terminating", PortName: "p80", Protocol: "tcp", ClusterIP: ip("198.18.0.46"), Port: 80,
			Endpoints: []Endpoint{
				{IP: ip("198.19.1.5"), Port: 80, Serving: true, Terminating: true, Local: true},
				{IP: ip("198.19.2.6"), Port: 80, Terminating: true},
			}},
		{Namespace: "ns7", Name: "itp-local", PortName: "p80", Protocol: "tcp", ClusterIP: ip("198.18.0.47"), Port: 80,
			InternalLocal: true, Endpoints: []Endpoint{ep("198.19.2.7", 80, false)}},
		{Namespace: "ns8", Name: "sctp", PortName: "p9", Protocol: "sctp", ClusterIP: ip("198.18.0.48"), Port: 9,
			Endpoints: []Endpoint{ep("198.19.1.6", 9, true)}},
	}
}

func build(c Config, ports []*ServicePort) *Builder {
	b := NewBuilder(c)
	for _, sp := range ports {
		b.Set(sp)
	}
	return b
}

func TestFullSync(t *testing.T) {
	rs := build(cfg4(), scenario()).Ruleset()
	// The kernel has a stale chain in each table and a flushed PTC-SVC-2A.
	golden(t, "full", RestoreInput(nil, rs, Saved{
		TableNAT:    {"PTC-SVC-2A": {}, "PTC-X-STALESTALESTALE1": {"-j RETURN"}},
		TableFilter: {"PTC-SERVICES": {"-j DROP"}, "PTC-OLD": {}},
	}))
}

func TestFullSyncWithoutDriftWritesNothing(t *testing.T) {
	for _, c := range []Config{cfg4(), {Family: IPv6, MasqueradeMark: 0x1000, ClusterCIDRs: []netip.Prefix{pfx("fd00:c613:0:1::/64")}}} {
		rs := build(c, scenario()).Ruleset()
		// What iptables-save prints after restoring the full input.
		saved, err := ParseSave(strings.NewReader(savedForm(RestoreInput(nil, rs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if got := RestoreInput(nil, rs, saved); got != nil {
			t.Errorf("%s: full sync over an unchanged kernel writes:\n%s", c.Family, got)
		}
		// One edited rule is repaired by rewriting its chain only.
		saved[TableNAT]["PTC-POSTROUTING"][0] = "-j ACCEPT"
		input := RestoreInput(nil, rs, saved)
		if got := ChainsWritten(input); got != 1 {
			t.Errorf("%s: an edited chain: %d chains written, want 1", c.Family, got)
		}
		if got := WrittenChains(input, 5); !slices.Equal(got, []string{"PTC-POSTROUTING"}) {
			t.Errorf("%s: written chains %q, want [PTC-POSTROUTING]", c.Family, got)
		}
	}
}

// savedForm turns restore input into iptables-save output: the same chains and rules, with
// the counters and policies of chain lines as iptables-save prints them.
func savedForm(input []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(input), "\n") {
		if strings.HasPrefix(line, "-X ") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func TestPartialSyncWritesOnlyChangedChains(t *testing.T) {
	ports := scenario()
	b := build(cfg4(), ports)
	prev := b.Ruleset()

	// One endpoint of ns1/clusterip goes away: only its bucket chain and the hairpin rules
	// (its only local endpoint went away) change.
	ports[0].Endpoints = ports[0].Endpoints[1:]
	b.Set(ports[0])
	golden(t, "partial-endpoint", RestoreInput(prev, b.Ruleset(), nil))

	// ns2/lb-local is deleted: its X and C chains are removed and its buckets rewritten.
	prev = b.Ruleset()
	b.Delete(ports[1].Key())
	golden(t, "partial-delete", RestoreInput(prev, b.Ruleset(), nil))

	if got := RestoreInput(b.Ruleset(), b.Ruleset(), nil); got != nil {
		t.Errorf("no change must render nothing, got:\n%s", got)
	}
}

func TestIPv6(t *testing.T) {
	c := Config{Family: IPv6, MasqueradeMark: 0x1000, ClusterCIDRs: []netip.Prefix{pfx("fd00:c613:0:1::/64")},
		NodePortsRestricted: true, NodePortAddresses: []netip.Addr{ip("fd00:c613::11"), ip("198.19.0.11")}}
	ports := []*ServicePort{
		{Namespace: "ns1", Name: "v6", PortName: "p80", Protocol: "tcp", ClusterIP: ip("fd00:c613:ffff::10"), Port: 80, NodePort: 30080,
			LoadBalancerIPs: []netip.Addr{ip("198.18.128.1"), ip("fd00:c613:fffe::1")},
			Endpoints:       []Endpoint{ep("fd00:c613:0:1::2", 8080, true), ep("fd00:c613:0:2::2", 8080, false)}},
	}
	golden(t, "ipv6", RestoreInput(nil, build(c, ports).Ruleset(), nil))
}

func TestNodePortAddressSelection(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"default: every local address", Config{Family: IPv4},
			[]string{"! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j PTC-NODEPORTS"}},
		{"default IPv6", Config{Family: IPv6},
			[]string{"! -d ::1/128 -m addrtype --dst-type LOCAL -j PTC-NODEPORTS"}},
		{"restricted", Config{Family: IPv4, NodePortsRestricted: true, NodePortAddresses: []netip.Addr{ip("198.19.0.11"), ip("198.19.0.77"), ip("fd00:c613::11")}},
			[]string{"-d 198.19.0.11/32 -j PTC-NODEPORTS", "-d 198.19.0.77/32 -j PTC-NODEPORTS"}},
		// --nodeport-addresses matching no local address: NodePorts answer nowhere, not everywhere.
		{"restricted to nothing", Config{Family: IPv4, NodePortsRestricted: true}, nil},
	}
	for _, c := range cases {
		if got := NewBuilder(c.cfg).nodePortJumps(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestEndpointSelection(t *testing.T) {
	sp := &ServicePort{Endpoints: []Endpoint{
		{IP: ip("10.0.0.3"), Port: 80, Ready: true, Serving: true},
		{IP: ip("10.0.0.1"), Port: 80, Serving: true, Terminating: true, Local: true},
		{IP: ip("10.0.0.2"), Port: 80, Ready: true, Serving: true, Local: true},
		{IP: ip("10.0.0.2"), Port: 80, Ready: true, Serving: true, Local: true}, // duplicate across slices
		{IP: ip("10.0.0.4"), Port: 80},                                          // neither ready nor serving
	}}
	str := func(eps []Endpoint) string {
		var s []string
		for _, e := range eps {
			s = append(s, e.String())
		}
		return strings.Join(s, ",")
	}
	if got, want := str(sp.ClusterEndpoints()), "10.0.0.2:80,10.0.0.3:80"; got != want {
		t.Errorf("cluster endpoints = %s, want %s", got, want)
	}
	if got, want := str(sp.LocalEndpoints()), "10.0.0.2:80"; got != want {
		t.Errorf("local endpoints = %s, want %s", got, want)
	}
	sp.Endpoints[2].Ready, sp.Endpoints[3].Ready = false, false
	if got, want := str(sp.LocalEndpoints()), "10.0.0.1:80"; got != want {
		t.Errorf("local endpoints with only a terminating one = %s, want %s (fallback)", got, want)
	}
	if got := sp.LocalReadyCount(); got != 0 {
		t.Errorf("LocalReadyCount = %d, want 0: terminating endpoints do not count", got)
	}
}

func TestParseSaveChains(t *testing.T) {
	save := "*nat\n:PREROUTING ACCEPT [0:0]\n:PTC-SERVICES - [0:0]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j PTC-SERVICES\nCOMMIT\n*filter\n:PTC-FORWARD - [0:0]\nCOMMIT\n"
	saved, err := ParseSave(strings.NewReader(save))
	if err != nil {
		t.Fatal(err)
	}
	got := saved.OwnedChains()
	if len(got[TableNAT]) != 1 || got[TableNAT][0] != "PTC-SERVICES" || len(got[TableFilter]) != 1 {
		t.Errorf("OwnedChains = %v", got)
	}
	if !saved.HasJump(Jump{Table: TableNAT, Chain: "PREROUTING", Spec: []string{"-j", "PTC-SERVICES"}}) {
		t.Errorf("HasJump: the PREROUTING jump not found in %v", saved)
	}
	golden(t, "cleanup", CleanupInput(got))
}

func TestChainNamesFitIptables(t *testing.T) {
	sp := &ServicePort{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("s", 63), PortName: strings.Repeat("p", 15), Protocol: "sctp"}
	for _, name := range []string{externalChain(sp.Key()), clusterChain(sp.Key()), bucketChain(255), nodePortChain(nodePortBucket(65535)), ChainMarkOffCluster} {
		if len(name) > 28 {
			t.Errorf("chain %s is %d characters, iptables allows 28", name, len(name))
		}
	}
}

// TestIncrementalMatchesFresh checks that a Builder changed port by port (keys added, removed
// and replaced after Ruleset sorted them) renders what a fresh Builder does.
func TestIncrementalMatchesFresh(t *testing.T) {
	all := scenario()
	b := NewBuilder(cfg4())
	for _, sp := range all[1:] {
		b.Set(sp)
	}
	b.Ruleset()
	b.Set(all[0])
	b.Delete(all[len(all)-1].Key())
	b.Set(all[len(all)-1])
	b.Delete(all[1].Key())
	b.Set(all[2])
	got := RestoreInput(nil, b.Ruleset(), nil)

	fresh := NewBuilder(cfg4())
	for _, sp := range all {
		if sp.Key() != all[1].Key() {
			fresh.Set(sp)
		}
	}
	if want := RestoreInput(nil, fresh.Ruleset(), nil); !bytes.Equal(got, want) {
		t.Errorf("incremental Builder differs from a fresh one:\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// TestBucketMatchesAsIptablesSavePrintsThem: a full sync compares iptables-save's text with the
// rendered rules, so the masks must be written in its canonical form (checked against iptables
// 1.8.9: "::/::ff", not "::0/::ff").
func TestBucketMatchesAsIptablesSavePrintsThem(t *testing.T) {
	v4, v6 := NewBuilder(Config{Family: IPv4}), NewBuilder(Config{Family: IPv6})
	for _, c := range []struct{ got, want string }{
		{v4.bucketMatch(0), "0.0.0.0/0.0.0.255"},
		{v4.bucketMatch(42), "0.0.0.42/0.0.0.255"},
		{v6.bucketMatch(0), "::/::ff"},
		{v6.bucketMatch(42), "::2a/::ff"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// TestInvalidSourceRangesDenyEveryone: a port whose source ranges are invalid gets the DROP of
// its LoadBalancer IP and no RETURN: no source is allowed, none of the ranges it carries either.
func TestInvalidSourceRangesDenyEveryone(t *testing.T) {
	sp := &ServicePort{Namespace: "ns", Name: "bad", PortName: "p", Protocol: "tcp", ClusterIP: ip("198.18.0.50"), Port: 80,
		LoadBalancerIPs: []netip.Addr{ip("198.18.128.50")}, SourceRanges: []netip.Prefix{pfx("198.19.0.0/24")}, SourceRangesInvalid: true,
		Endpoints: []Endpoint{ep("198.19.1.9", 8080, true)}}
	filter := build(cfg4(), []*ServicePort{sp}).Ruleset().Tables[TableFilter][ChainServices]
	want := []string{"-p tcp -m conntrack --ctorigdst 198.18.128.50 --ctorigdstport 80 -j DROP"}
	if !slices.Equal(filter, want) {
		t.Errorf("filter rules %q, want only %q", filter, want)
	}
}

// TestSourceRangesDoNotSkipTheNoLocalDrop (issue 31 item 11): an allowed source's RETURN leaves
// filter PTC-SERVICES, so it comes after the drop of an externalTrafficPolicy: Local port
// without a local endpoint; before it, an allowed client's packet to the LB IP was not dropped
// but forwarded on undelivered (kube-proxy's iptables mode drops it whatever the source).
func TestSourceRangesDoNotSkipTheNoLocalDrop(t *testing.T) {
	sp := &ServicePort{Namespace: "ns", Name: "lb", PortName: "p", Protocol: "tcp", ClusterIP: ip("198.18.0.51"), Port: 80, NodePort: 30051,
		LoadBalancerIPs: []netip.Addr{ip("198.18.128.51")}, SourceRanges: []netip.Prefix{pfx("198.19.0.0/24")}, ExternalLocal: true,
		HealthCheckNodePort: 30001, Endpoints: []Endpoint{ep("198.19.2.9", 8080, false)}}
	filter := build(cfg4(), []*ServicePort{sp}).Ruleset().Tables[TableFilter][ChainServices]
	drop := slices.Index(filter, "-d 198.18.128.51/32 -p tcp -m tcp --dport 80 -j DROP")
	ret := slices.Index(filter, "-s 198.19.0.0/24 -p tcp -m conntrack --ctorigdst 198.18.128.51 --ctorigdstport 80 -j RETURN")
	accept := slices.Index(filter, "-p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30001 -j ACCEPT")
	if drop < 0 || ret < 0 || accept < 0 || !(drop < ret && ret < accept) {
		t.Errorf("filter PTC-SERVICES %q: want the no-local-endpoint DROP (at %d) before the source range's RETURN (at %d), before the health check's ACCEPT (at %d)",
			filter, drop, ret, accept)
	}
}
