package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/api"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func TestValidatePeers(t *testing.T) {
	ok := Peer{Address: netip.MustParseAddr("198.19.0.1"), ASN: 64512, MyASN: 64513}
	with := func(f func(*Peer)) Peer { p := ok; f(&p); return p }
	for _, c := range []struct {
		name  string
		peers []Peer
		want  []string // substrings of the error; none: valid
	}{
		{"minimal", []Peer{ok}, nil},
		{"ipv6 with bfd", []Peer{with(func(p *Peer) {
			p.Address = netip.MustParseAddr("fd00:c613::1")
			p.BFD = &BFD{ReceiveInterval: 300 * time.Millisecond, Multiplier: 3}
		})}, nil},
		{"missing everything", []Peer{{}}, []string{"address: missing", "asn: missing", "myASN: missing"}},
		{"duplicate", []Peer{ok, ok}, []string{"given twice"}},
		{"hold too short", []Peer{with(func(p *Peer) { p.HoldTime = 2 * time.Second })}, []string{"at least 3s"}},
		{"keepalive not under hold", []Peer{with(func(p *Peer) { p.HoldTime = 9 * time.Second; p.KeepaliveTime = 9 * time.Second })}, []string{"less than the hold time"}},
		{"fractional seconds", []Peer{with(func(p *Peer) { p.HoldTime = 3500 * time.Millisecond })}, []string{"whole seconds"}},
		{"source of other family", []Peer{with(func(p *Peer) { p.SourceAddress = netip.MustParseAddr("fd00:c613::2") })}, []string{"not the family"}},
		{"bfd multihop", []Peer{with(func(p *Peer) { p.BFD = &BFD{}; p.EBGPMultihopTTL = 3 })}, []string{"single-hop"}},
		{"multihop ibgp", []Peer{with(func(p *Peer) { p.MyASN = p.ASN; p.EBGPMultihopTTL = 3 })}, []string{"only for eBGP"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := validatePeers(c.peers)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidateAdvertisements(t *testing.T) {
	good := []Advertisement{{Prefix: netip.MustParsePrefix("198.18.200.10/32")}, {Prefix: netip.MustParsePrefix("fd00:c613:ff80::10/128")}}
	if err := validateAdvertisements(good); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		advs []Advertisement
		want string
	}{
		{[]Advertisement{{}}, "prefix: missing"},
		{[]Advertisement{{Prefix: netip.MustParsePrefix("198.18.200.10/24")}}, "host bits set"},
		{[]Advertisement{good[0], good[0]}, "given twice"},
		{[]Advertisement{{Prefix: good[0].Prefix, Peers: []netip.Addr{netip.MustParseAddr("fd00:c613::1")}}}, "not a plain address of the family"},
		{[]Advertisement{{Prefix: good[0].Prefix, Peers: []netip.Addr{{}}}}, "not a plain address of the family"},
	} {
		err := validateAdvertisements(c.advs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.advs, err, c.want)
		}
	}
}

func TestSendsTo(t *testing.T) {
	v4, v4b, v6 := netip.MustParseAddr("198.19.0.1"), netip.MustParseAddr("198.19.0.2"), netip.MustParseAddr("fd00:c613::1")
	all := Advertisement{Prefix: netip.MustParsePrefix("198.18.200.10/32")}
	one := Advertisement{Prefix: all.Prefix, Peers: []netip.Addr{v4b}}
	if !all.sendsTo(v4) || !all.sendsTo(v4b) || all.sendsTo(v6) {
		t.Error("an advertisement without Peers goes to every peer of its family, and only those")
	}
	if one.sendsTo(v4) || !one.sendsTo(v4b) {
		t.Error("an advertisement with Peers goes to those only")
	}
	got := exportFor(v4b, map[netip.Prefix]Advertisement{all.Prefix: one, netip.MustParsePrefix("fd00:c613:ff80::10/128"): {Prefix: netip.MustParsePrefix("fd00:c613:ff80::10/128")}})
	if len(got) != 1 || !got[all.Prefix] {
		t.Errorf("exportFor: %v", got)
	}
}

func TestParseCommunities(t *testing.T) {
	c, err := ParseCommunity("65000:100")
	if err != nil || c != 65000<<16|100 {
		t.Errorf("ParseCommunity: %d, %v", c, err)
	}
	for _, bad := range []string{"65000", "65536:1", "1:x", ""} {
		if _, err := ParseCommunity(bad); err == nil {
			t.Errorf("ParseCommunity(%q) accepted", bad)
		}
	}
	lc, err := ParseLargeCommunity("4200000000:1:2")
	if err != nil || lc != (LargeCommunity{4200000000, 1, 2}) || lc.String() != "4200000000:1:2" {
		t.Errorf("ParseLargeCommunity: %v, %v", lc, err)
	}
	if _, err := ParseLargeCommunity("1:2"); err == nil {
		t.Error("ParseLargeCommunity(1:2) accepted")
	}
}

func TestPeerEqual(t *testing.T) {
	a := Peer{Address: netip.MustParseAddr("198.19.0.1"), ASN: 1, MyASN: 2, BFD: &BFD{Multiplier: 3}}
	b := a
	b.BFD = &BFD{Multiplier: 3} // another pointer, same timers
	if !a.equal(b) {
		t.Error("same peer with a copied BFD pointer is not equal")
	}
	b.BFD.Multiplier = 5
	if a.equal(b) {
		t.Error("different BFD multiplier is equal")
	}
	b.BFD = nil
	if a.equal(b) {
		t.Error("BFD on and off are equal")
	}
}

func TestAPIPeer(t *testing.T) {
	p := apiPeer(Peer{
		Address: netip.MustParseAddr("fd00:c613::1"), ASN: 64512, MyASN: 64513, Password: "pw",
		HoldTime: 9 * time.Second, BFD: &BFD{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 200 * time.Millisecond, Multiplier: 3},
	}, false)
	if p.Conf.NeighborAddress != "fd00:c613::1" || p.Conf.PeerAsn != 64512 || p.Conf.LocalAsn != 64513 || p.Conf.AuthPassword != "pw" {
		t.Errorf("conf %+v", p.Conf)
	}
	if tc := p.Timers.Config; tc.HoldTime != 9 || tc.KeepaliveInterval != 3 || tc.ConnectRetry != 5 || tc.IdleHoldTimeAfterReset != 5 {
		t.Errorf("timers %+v", tc)
	}
	if p.Transport.RemotePort != 179 {
		t.Errorf("port %d", p.Transport.RemotePort)
	}
	if len(p.AfiSafis) != 1 || p.AfiSafis[0].Config.Family.Afi != api.Family_AFI_IP6 {
		t.Errorf("families %v: want IPv6 unicast only", p.AfiSafis)
	}
	if b := p.Bfd; !b.Enabled || b.RequiredMinimumReceive != 100000 || b.DesiredMinimumTxInterval != 200000 || b.DetectionMultiplier != 3 {
		t.Errorf("bfd %+v", b)
	}
	if p.EbgpMultihop != nil {
		t.Errorf("multihop set without a TTL: %+v", p.EbgpMultihop)
	}
	if p.GracefulRestart != nil || p.AfiSafis[0].MpGracefulRestart != nil {
		t.Errorf("graceful restart set without a restart time: %+v", p.GracefulRestart)
	}
}

func TestAPIPeerGracefulRestart(t *testing.T) {
	for _, restarting := range []bool{false, true} {
		p := apiPeer(Peer{Address: netip.MustParseAddr("198.19.0.1"), ASN: 64512, MyASN: 64513, GracefulRestart: 30 * time.Second}, restarting)
		gr := p.GracefulRestart
		if gr == nil || !gr.Enabled || gr.RestartTime != 30 || gr.DeferralTime != 10 || gr.LocalRestarting != restarting || gr.HelperOnly {
			t.Errorf("restarting %v: graceful restart %+v; want enabled, 30 s, deferral 10 s", restarting, gr)
		}
		if m := p.AfiSafis[0].MpGracefulRestart; m == nil || !m.Config.Enabled {
			t.Errorf("restarting %v: IPv4 unicast without graceful restart: %+v", restarting, m)
		}
	}
	bad := Peer{Address: netip.MustParseAddr("198.19.0.1"), ASN: 64512, MyASN: 64513}
	for _, d := range []time.Duration{-time.Second, 1500 * time.Millisecond, MaxGracefulRestart + time.Second} {
		bad.GracefulRestart = d
		if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "gracefulRestart") {
			t.Errorf("gracefulRestart %s: validate = %v; want an error naming it", d, err)
		}
	}
}

func TestAPIPath(t *testing.T) {
	p4, err := apiPath(Advertisement{
		Prefix: netip.MustParsePrefix("198.18.200.10/32"), Communities: []uint32{65000<<16 | 100},
		LargeCommunities: []LargeCommunity{{1, 2, 3}}, LocalPref: 200,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p4.Family != gobgp.RF_IPv4_UC || p4.Nlri.String() != "198.18.200.10/32" {
		t.Errorf("family %v nlri %v", p4.Family, p4.Nlri)
	}
	types := map[gobgp.BGPAttrType]gobgp.PathAttributeInterface{}
	for _, a := range p4.Attrs {
		types[a.GetType()] = a
	}
	for _, want := range []gobgp.BGPAttrType{gobgp.BGP_ATTR_TYPE_ORIGIN, gobgp.BGP_ATTR_TYPE_NEXT_HOP, gobgp.BGP_ATTR_TYPE_COMMUNITIES, gobgp.BGP_ATTR_TYPE_LARGE_COMMUNITY, gobgp.BGP_ATTR_TYPE_LOCAL_PREF} {
		if types[want] == nil {
			t.Errorf("IPv4 path lacks attribute %v", want)
		}
	}
	if nh := types[gobgp.BGP_ATTR_TYPE_NEXT_HOP].(*gobgp.PathAttributeNextHop); !nh.Value.IsUnspecified() {
		t.Errorf("next hop %v: want unspecified (GoBGP puts the session's local address)", nh.Value)
	}
	p6, err := apiPath(Advertisement{Prefix: netip.MustParsePrefix("fd00:c613:ff80::10/128")})
	if err != nil {
		t.Fatal(err)
	}
	if p6.Family != gobgp.RF_IPv6_UC {
		t.Errorf("family %v", p6.Family)
	}
	var mp *gobgp.PathAttributeMpReachNLRI
	for _, a := range p6.Attrs {
		if m, ok := a.(*gobgp.PathAttributeMpReachNLRI); ok {
			mp = m
		}
		if a.GetType() == gobgp.BGP_ATTR_TYPE_NEXT_HOP || a.GetType() == gobgp.BGP_ATTR_TYPE_LOCAL_PREF {
			t.Errorf("IPv6 path has %v", a.GetType())
		}
	}
	if mp == nil || !mp.Nexthop.IsUnspecified() || !mp.Nexthop.Is6() {
		t.Errorf("MP_REACH_NLRI %v: want an unspecified IPv6 next hop", mp)
	}
}
