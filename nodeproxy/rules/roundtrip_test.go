//go:build e2e

package rules

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/portico-lb/portico/internal/prereq"
)

// TestRoundTripThroughIptables restores the rendered rules of rich scenarios (both families,
// every kind of rule, addresses in bucket 0) into real iptables in a scratch network namespace
// and reads them back with iptables-save: a full sync over that kernel must write nothing.
// Rendering must match iptables-save's text exactly, or every full sync rewrites chains.
// Needs root and iptables (it fails naming the fix without them, or skips with
// PORTICO_SKIP_PRIVILEGED=1); nothing is jumped to, so no packet meets these rules.
func TestRoundTripThroughIptables(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables)
	sweepScratchNamespaces()
	ns := fmt.Sprintf("%s%d", scratchPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })

	v4 := append(scenario(),
		&ServicePort{Namespace: "ns9", Name: "zero", PortName: "p80", Protocol: "tcp",
			ClusterIP: ip("198.18.1.0"), Port: 80, NodePort: 30100, LoadBalancerIPs: []netip.Addr{ip("198.18.129.0")},
			Endpoints: []Endpoint{ep("198.19.1.7", 80, true)}},
		&ServicePort{Namespace: "ns10", Name: "sctp-np", PortName: "p9", Protocol: "sctp",
			ClusterIP: ip("198.18.1.10"), Port: 9, NodePort: 30109, AffinitySeconds: 60,
			Endpoints: []Endpoint{ep("198.19.1.8", 9, true), ep("198.19.2.8", 9, false)}},
		&ServicePort{Namespace: "ns11", Name: "udp-local", PortName: "dns", Protocol: "udp",
			ClusterIP: ip("198.18.1.11"), Port: 53, NodePort: 30153, LoadBalancerIPs: []netip.Addr{ip("198.18.129.11")},
			SourceRanges: []netip.Prefix{pfx("198.19.0.0/24")}, ExternalLocal: true, HealthCheckNodePort: 30154,
			Endpoints: []Endpoint{ep("198.19.2.9", 5353, false)}})
	c6 := Config{Family: IPv6, MasqueradeMark: 0x1000, ClusterCIDRs: []netip.Prefix{pfx("fd00:c613:0:1::/64"), pfx("fd00:c613:0:2::/64")}}
	for _, tc := range []struct {
		cfg   Config
		ports []*ServicePort
		bin   string
	}{
		{cfg4(), v4, "iptables"},
		{c6, toIPv6(v4), "ip6tables"},
	} {
		rs := build(tc.cfg, tc.ports).Ruleset()
		run := func(stdin []byte, name string, args ...string) []byte {
			t.Helper()
			cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
			cmd.Stdin = bytes.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v: %s", name, args, err, out)
			}
			return out
		}
		run(RestoreInput(nil, rs, nil), tc.bin+"-restore", "--noflush")
		saved, err := ParseSave(bytes.NewReader(run(nil, tc.bin+"-save")))
		if err != nil {
			t.Fatal(err)
		}
		if n, want := len(saved.OwnedChains()[TableNAT]), len(rs.Tables[TableNAT]); n != want {
			t.Fatalf("%s: iptables-save shows %d owned nat chains, %d were restored", tc.cfg.Family, n, want)
		}
		if got := RestoreInput(nil, rs, saved); got != nil {
			t.Errorf("%s: a full sync over what iptables-save printed would write:\n%s", tc.cfg.Family, got)
		}
	}
}

// scratchPrefix names this test's namespace, followed by the test process's pid.
const scratchPrefix = "ptrules-"

// sweepScratchNamespaces deletes the namespaces of test processes that died before their cleanup.
func sweepScratchNamespaces() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(strings.TrimPrefix(name, scratchPrefix))
		if !strings.HasPrefix(name, scratchPrefix) || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// toIPv6 maps the scenario's addresses into IPv6: 198.18.a.b -> fd00:c613:ff00::a:b (services),
// 198.19.x.y -> fd00:c613:0:x::y (pods and clients); ports and policies are kept.
func toIPv6(ports []*ServicePort) []*ServicePort {
	conv := func(a netip.Addr) netip.Addr {
		b := a.As4()
		if b[1] == 18 {
			return netip.MustParseAddr(fmt.Sprintf("fd00:c613:ff00::%x:%x", b[2], b[3]))
		}
		return netip.MustParseAddr(fmt.Sprintf("fd00:c613:0:%x::%x", b[2], b[3]))
	}
	convAll := func(as []netip.Addr) []netip.Addr {
		var out []netip.Addr
		for _, a := range as {
			out = append(out, conv(a))
		}
		return out
	}
	var out []*ServicePort
	for _, sp := range ports {
		c := *sp
		c.ClusterIP = conv(sp.ClusterIP)
		c.ExternalIPs, c.LoadBalancerIPs = convAll(sp.ExternalIPs), convAll(sp.LoadBalancerIPs)
		c.SourceRanges = nil
		for _, r := range sp.SourceRanges {
			c.SourceRanges = append(c.SourceRanges, netip.PrefixFrom(conv(r.Addr()), 128-(32-r.Bits())))
		}
		c.Endpoints = nil
		for _, e := range sp.Endpoints {
			e.IP = conv(e.IP)
			c.Endpoints = append(c.Endpoints, e)
		}
		out = append(out, &c)
	}
	return out
}
