package router

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// showRoute is `birdc show route 198.18.230.6/32 all` from bird 2.0.12 in e2e/suites/bgp (two of its
// three routes).
const showRoute = `BIRD 2.0.12 ready.
Table master4:
198.18.230.6/32      unicast [n0_4 17:26:18.386] * (100) [AS64700i]
	via 198.19.0.11 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64700
	BGP.next_hop: 198.19.0.11
	BGP.local_pref: 100
	BGP.community: (64700,100)
	BGP.large_community: (64700, 1, 2)
                     unicast [n2_4 17:26:18.396] (100) [AS64700i]
	via 198.19.0.13 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64700
	BGP.next_hop: 198.19.0.13
	BGP.local_pref: 100
`

func TestParseRoutes(t *testing.T) {
	routes, err := ParseRoutes(showRoute)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 {
		t.Fatalf("%d routes, want 2: %+v", len(routes), routes)
	}
	want := []struct {
		proto, hop string
		community  string
	}{{"n0_4", "198.19.0.11", "(64700,100)"}, {"n2_4", "198.19.0.13", ""}}
	for i, w := range want {
		r := routes[i]
		if r.Proto != w.proto || r.NextHop != netip.MustParseAddr(w.hop) || r.Attrs["BGP.community"] != w.community {
			t.Errorf("route %d: %+v, want proto %s via %s community %q", i, r, w.proto, w.hop, w.community)
		}
	}
	if got := routes[0].Attrs["BGP.large_community"]; got != "(64700, 1, 2)" {
		t.Errorf("large community %q", got)
	}
	if routes, err := ParseRoutes("BIRD 2.0.12 ready.\n"); err != nil || len(routes) != 0 {
		t.Errorf("no routes: %v, %v", routes, err)
	}
	if _, err := ParseRoutes("x/32 unicast [p 1] *\n\tvia not-an-address on eth0\n"); err == nil {
		t.Error("a bad next hop parsed")
	}
}

func TestParseBFDSessions(t *testing.T) {
	out := `BIRD 2.0.12 ready.
bfd1:
IP address                Interface  State      Since         Interval  Timeout
198.19.0.11               eth0       Up         17:26:18.101    0.100    0.300
fd00:c613::12             eth0       Down       17:26:19.202    1.000    0.000
`
	got := ParseBFDSessions(out)
	if len(got) != 2 || got[netip.MustParseAddr("198.19.0.11")] != "Up" || got[netip.MustParseAddr("fd00:c613::12")] != "Down" {
		t.Errorf("ParseBFDSessions = %v", got)
	}
}

func TestRender(t *testing.T) {
	h := &netlab.Host{Name: "router", Addr: netip.MustParseAddr("198.19.0.1")}
	c := Config{ASN: 64512, HoldTime: 3 * time.Second, Keepalive: time.Second, Neighbors: []Neighbor{
		{Name: "node1", Addr: netip.MustParseAddr("198.19.0.11"), ASN: 64513, Password: "pw", BFD: true},
		{Name: "node1_6", Addr: netip.MustParseAddr("fd00:c613::11"), ASN: 64513},
		{Name: "node2", Addr: netip.MustParseAddr("198.19.0.12"), ASN: 64513, Local: netip.MustParseAddr("198.19.0.2")},
	}, Debug: true}
	b, err := Render(h, c)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{
		"router id 198.19.0.1;",
		`interface "eth0" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; };`,
		"hold time 3;", "keepalive time 1;", "local as 64512;",
		"protocol bgp node1 from nodes {\n\tneighbor 198.19.0.11 as 64513;\n\tpassword \"pw\";\n\tbfd on;\n\tipv4 { import all; export none; };",
		"protocol bgp node1_6 from nodes {\n\tneighbor fd00:c613::11 as 64513;\n\tbfd off;\n\tipv6 { import all; export none; };",
		"neighbor 198.19.0.12 as 64513;\n\tlocal 198.19.0.2 as 64512;\n\tbfd off;",
		"log stderr all;\ndebug protocols all;\nrouter id",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}

	for name, bad := range map[string]Config{
		"hold under 3 s":     {ASN: 1, HoldTime: 2 * time.Second},
		"fractional seconds": {ASN: 1, HoldTime: 3500 * time.Millisecond},
		"bad name":           {ASN: 1, Neighbors: []Neighbor{{Name: "node-1", Addr: h.Addr, ASN: 2}}},
		"duplicate name":     {ASN: 1, Neighbors: []Neighbor{{Name: "a", Addr: h.Addr, ASN: 2}, {Name: "a", Addr: h.Addr, ASN: 2}}},
		"quote in password":  {ASN: 1, Neighbors: []Neighbor{{Name: "a", Addr: h.Addr, ASN: 2, Password: `x"y`}}},
		"no ASN":             {ASN: 1, Neighbors: []Neighbor{{Name: "a", Addr: h.Addr}}},
	} {
		if _, err := Render(h, bad); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

func TestSameSince(t *testing.T) {
	base := "up 02:32:06.150 Established"
	for _, tc := range []struct {
		other string
		same  bool
	}{
		{"up 02:32:06.151 Established", true}, // bird's millisecond jitter
		{"up 02:32:06.149 Established", true},
		{"up 02:32:07.402 Established", false}, // reset
		{"start 02:32:06.150 Connect", false},
		{"up 02:32:06.150 Idle", false},
		{"", false},
	} {
		if got := SameSince(tc.other, base); got != tc.same {
			t.Errorf("SameSince(%q, %q) = %v, want %v", tc.other, base, got, tc.same)
		}
	}
}
