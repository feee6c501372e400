package baremetal

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
