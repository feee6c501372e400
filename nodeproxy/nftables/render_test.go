package nftables

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables/binaryutil"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

func ep(s string, local bool) rules.Endpoint {
	return rules.Endpoint{IP: netip.MustParseAddr(s), Port: 8080, Ready: true, Local: local}
}

// dump prints a port's chains and elements in a stable, readable form.
func dump(p *portState) string {
	var b strings.Builder
	for _, m := range elemMaps {
		for _, e := range p.elems {
			if e.m != m {
				continue
			}
			k, v := e.k, e.v
			if isEndpointMap(m) {
				a, _ := netip.AddrFromSlice([]byte(v)[:4])
				v = netip.AddrPortFrom(a, uint16(v[4])<<8|uint16(v[5])).String()
			}
			b.WriteString(m + " " + describeKey(m, []byte(k)) + " : " + v + "\n")
		}
	}
	for name, rs := range p.chains {
		b.WriteString("chain " + name + "\n" + describe(rs))
	}
	return b.String()
}

func describeKey(m string, k []byte) string {
	if isEndpointMap(m) {
		return fmt.Sprint(binaryutil.NativeEndian.Uint32(k))
	}
	if m == mapNodePorts || m == mapNoEndpointPort {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(k[4])<<8|uint16(k[5])).String()
	}
	a, _ := netip.AddrFromSlice(k[:4])
	return netip.AddrPortFrom(a, uint16(k[8])<<8|uint16(k[9])).String()
}

func TestRender(t *testing.T) {
	var ranges endpointRanges
	ranges.reset()
	intMap := endpointMaps[endpointShard("int-ns/web/tcp/http")]
	ranges.next[endpointShard("int-ns/web/tcp/http")] = 32
	cfg := &config{fam: familyOf(rules.IPv4), mark: 0x1000, clusterCIDRs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")},
		endpointRange: ranges.get}
	base := func() *rules.ServicePort {
		return &rules.ServicePort{Namespace: "ns", Name: "web", PortName: "http", Protocol: "tcp",
			ClusterIP: netip.MustParseAddr("198.18.0.10"), Port: 80}
	}
	for _, c := range []struct {
		name   string
		mutate func(*rules.ServicePort)
		want   []string
		absent []string
	}{
		{"clusterip two endpoints", func(sp *rules.ServicePort) {
			sp.Endpoints = []rules.Endpoint{ep("198.19.1.2", false), ep("198.19.1.1", false)}
		}, []string{"service-ips 198.18.0.10:80 : int-ns/web/tcp/http", "jump mark-offcluster",
			"dnat to numgen random mod 2 offset 32 map @" + intMap, intMap + " 32 : 198.19.1.1:8080", intMap + " 33 : 198.19.1.2:8080"},
			[]string{"no-endpoint"}},
		{"no endpoints: rejected", func(sp *rules.ServicePort) { sp.NodePort = 30000 },
			[]string{"no-endpoint-services 198.18.0.10:80 : reject", "no-endpoint-nodeports 0.0.0.0:30000 : reject"}, []string{"chain"}},
		{"internal traffic policy local without local endpoint: dropped", func(sp *rules.ServicePort) {
			sp.InternalLocal = true
			sp.Endpoints = []rules.Endpoint{ep("198.19.1.1", false)}
		}, []string{"no-endpoint-services 198.18.0.10:80 : drop"}, []string{"service-ips"}},
		{"external traffic policy local", func(sp *rules.ServicePort) {
			sp.ExternalLocal, sp.NodePort = true, 30000
			sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.18.128.1")}
			sp.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.200.0/24")}
			sp.Endpoints = []rules.Endpoint{ep("198.19.1.1", false), ep("198.19.0.5", true)}
		}, []string{"service-ips 198.18.128.1:80 : ext-ns/web/tcp/http", "service-nodeports 0.0.0.0:30000 : ext-ns/web/tcp/http",
			"firewall-ips 198.18.128.1:80 : fw-ns/web/tcp/http", "saddr 198.18.200.0/24 return\ndrop",
			"saddr 198.19.0.0/16 goto clu-ns/web/tcp/http", "fib saddr type local jump mark-for-masquerade",
			"dnat to 198.19.0.5:8080\n"}, []string{"no-endpoint"}},
		{"external traffic policy local without local endpoint: dropped, short-circuited", func(sp *rules.ServicePort) {
			sp.ExternalLocal, sp.NodePort = true, 30000
			sp.Endpoints = []rules.Endpoint{ep("198.19.1.1", false)}
		}, []string{"no-endpoint-nodeports 0.0.0.0:30000 : drop", "fib saddr type local goto clu-ns/web/tcp/http"}, nil},
		{"affinity", func(sp *rules.ServicePort) {
			sp.AffinitySeconds = 10
			sp.Endpoints = []rules.Endpoint{ep("198.19.1.1", false), ep("198.19.1.2", false)}
		}, []string{"saddr @aff-int-ns/web/tcp/http/", "numgen random mod 2 vmap", "update @aff-int-ns/web/tcp/http/"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp := base()
			c.mutate(sp)
			got := dump(render(cfg, sp))
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(got, a) {
					t.Errorf("unexpected %q in:\n%s", a, got)
				}
			}
		})
	}
}

// TestServiceKey: address . protocol . port padded to 32-bit registers, as the kernel compares.
func TestServiceKey(t *testing.T) {
	got := serviceKey(netip.MustParseAddr("198.18.0.1"), "udp", 53)
	want := []byte{198, 18, 0, 1, 17, 0, 0, 0, 0, 53, 0, 0}
	if string(got) != string(want) {
		t.Errorf("serviceKey = %v, want %v", got, want)
	}
	if n := familyOf(rules.IPv4).serviceKeyType().Bytes; int(n) != len(want) {
		t.Errorf("key type is %d bytes, keys %d", n, len(want))
	}
}
