package addresspool

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/api/v1alpha1"
)

func TestParseBGP(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name    string
		in      *v1alpha1.BGPAnnounce
		wantErr []string
		check   func(t *testing.T, b *BGPSettings)
	}{
		{name: "none", in: nil, check: func(t *testing.T, b *BGPSettings) {
			if b != nil {
				t.Errorf("got %+v, want nil", b)
			}
		}},
		{name: "defaults", in: &v1alpha1.BGPAnnounce{}, check: func(t *testing.T, b *BGPSettings) {
			if b.AggregationLength != 32 || b.AggregationLengthV6 != 128 || b.LocalPref != 0 || !b.PeerSelected("any", nil) {
				t.Errorf("got %+v", b)
			}
		}},
		{name: "full", in: &v1alpha1.BGPAnnounce{
			Peers: []string{"r1"}, PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}},
			Communities: []string{"65000:100", "0:0"}, LargeCommunities: []string{"4200000000:1:2"},
			LocalPreference: i64(200), AggregationLength: i32(24), AggregationLengthV6: i32(64),
		}, check: func(t *testing.T, b *BGPSettings) {
			if len(b.Communities) != 2 || b.Communities[0] != 65000<<16|100 || b.LargeCommunities[0] != [3]uint32{4200000000, 1, 2} ||
				b.LocalPref != 200 || b.AggregationLength != 24 || b.AggregationLengthV6 != 64 {
				t.Errorf("got %+v", b)
			}
			if !b.PeerSelected("r1", nil) || !b.PeerSelected("r2", map[string]string{"rack": "a"}) || b.PeerSelected("r2", nil) {
				t.Error("peer selection wrong")
			}
		}},
		{name: "bad", in: &v1alpha1.BGPAnnounce{
			Communities: []string{"70000:1", "1"}, LargeCommunities: []string{"1:2"}, LocalPreference: i64(-1),
			AggregationLength: i32(33), AggregationLengthV6: i32(129),
		}, wantErr: []string{"communities[0]", "communities[1]", "largeCommunities[0]", "localPreference", "aggregationLength", "aggregationLengthV6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap := &v1alpha1.AddressPool{}
			ap.Spec.Announce.BGP = tc.in
			b, errs := ParseBGP(ap)
			if len(errs) != len(tc.wantErr) {
				t.Fatalf("errors %v, want %d", errs, len(tc.wantErr))
			}
			for i, e := range errs {
				if !strings.Contains(e.Field, tc.wantErr[i]) {
					t.Errorf("error %d %q, want field %s", i, e.Error(), tc.wantErr[i])
				}
			}
			if tc.check != nil {
				tc.check(t, b)
			}
		})
	}
}

func TestCheckPeers(t *testing.T) {
	peers := map[string]map[string]string{"r1": {"rack": "a"}, "r2": {"rack": "b"}}
	for _, tc := range []struct {
		name string
		in   v1alpha1.BGPAnnounce
		want []string // substrings of the errors, in order; none: no problem
	}{
		{name: "every peer", in: v1alpha1.BGPAnnounce{}},
		{name: "named", in: v1alpha1.BGPAnnounce{Peers: []string{"r1"}}},
		{name: "selected", in: v1alpha1.BGPAnnounce{PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "b"}}}},
		{name: "one name unknown", in: v1alpha1.BGPAnnounce{Peers: []string{"r1", "r9"}},
			want: []string{`spec.announce.bgp.peers[1]: Not found: "r9"`}},
		{name: "unknown name, selector matches", in: v1alpha1.BGPAnnounce{Peers: []string{"r9"},
			PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}},
			want: []string{`peers[0]: Not found: "r9"`}},
		{name: "nothing selected", in: v1alpha1.BGPAnnounce{Peers: []string{"r9"},
			PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "z"}}},
			want: []string{`peers[0]: Not found`, `peers [r9] and peerSelector {rack=z}`, "selects no BGPPeer"}},
		{name: "selector matches nothing", in: v1alpha1.BGPAnnounce{PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "z"}}},
			want: []string{`spec.announce.bgp: Invalid value: "peerSelector {rack=z}": selects no BGPPeer`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, errs := ParseBGP(&v1alpha1.AddressPool{Spec: v1alpha1.AddressPoolSpec{Announce: v1alpha1.Announce{BGP: &tc.in}}})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := b.CheckPeers(peers).ToAggregate()
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("unexpected problems: %v", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no problem, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
		})
	}
	if errs := (&BGPSettings{}).CheckPeers(nil); errs != nil {
		t.Errorf("every peer, no BGPPeer at all: %v; want no problem", errs)
	}
}
