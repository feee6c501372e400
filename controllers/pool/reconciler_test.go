package pool

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
)

func TestDesiredStatus(t *testing.T) {
	mk := func(name string, age int64, addrs ...string) v1alpha1.AddressPool {
		return v1alpha1.AddressPool{
			ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3, CreationTimestamp: metav1.Unix(age, 0)},
			Spec:       v1alpha1.AddressPoolSpec{Addresses: addrs},
		}
	}
	items := []v1alpha1.AddressPool{
		mk("good", 1, "198.18.1.0/29", "2001:db8:1::/126"),
		mk("bad", 2, "198.18.2.0/33"),
		mk("young", 3, "198.18.1.4/30"),
	}
	pools := addresspool.Resolve(items)
	held := []netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.5")}
	find := func(name string) *addresspool.Pool {
		for _, p := range pools {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no pool %s", name)
		return nil
	}

	good := DesiredStatus(&items[0], find("good"), held, nil)
	if good.IPv4 == nil || *good.IPv4 != (v1alpha1.FamilyUsage{Assigned: 2, Available: 4}) {
		t.Errorf("good IPv4 = %+v, want assigned 2 available 4", good.IPv4)
	}
	if good.IPv6 == nil || *good.IPv6 != (v1alpha1.FamilyUsage{Available: 4}) {
		t.Errorf("good IPv6 = %+v, want available 4", good.IPv6)
	}
	if !meta.IsStatusConditionTrue(good.Conditions, v1alpha1.ConditionValid) || meta.IsStatusConditionTrue(good.Conditions, v1alpha1.ConditionConflict) {
		t.Errorf("good conditions = %+v", good.Conditions)
	}
	if good.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d", good.ObservedGeneration)
	}

	bad := DesiredStatus(&items[1], find("bad"), held, nil)
	c := meta.FindStatusCondition(bad.Conditions, v1alpha1.ConditionValid)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.addresses[0]") {
		t.Errorf("bad Valid condition = %+v", c)
	}

	young := DesiredStatus(&items[2], find("young"), held, nil)
	c = meta.FindStatusCondition(young.Conditions, v1alpha1.ConditionConflict)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "good") {
		t.Errorf("young Conflict condition = %+v", c)
	}
	if young.IPv4 == nil || young.IPv4.Available != 0 || young.IPv4.Assigned != 1 {
		t.Errorf("young IPv4 = %+v, want 1 assigned, nothing available", young.IPv4)
	}

	if meta.FindStatusCondition(good.Conditions, v1alpha1.ConditionBGPValid) != nil {
		t.Errorf("a pool without BGP settings has a BGPValid condition: %+v", good.Conditions)
	}
	withBGP := items[0].DeepCopy()
	withBGP.Spec.Announce.BGP = &v1alpha1.BGPAnnounce{Communities: []string{"65000:1"}}
	if st := DesiredStatus(withBGP, find("good"), held, nil); !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionBGPValid) {
		t.Errorf("valid BGP settings: conditions = %+v", st.Conditions)
	}
	withBGP.Spec.Announce.BGP.Communities = []string{"65536:1"}
	st := DesiredStatus(withBGP, find("good"), held, nil)
	c = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBGPValid)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.announce.bgp.communities[0]") ||
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionValid) {
		t.Errorf("bad community: conditions = %+v", st.Conditions)
	}

	// A peer selection that matches no BGPPeer is reported the same way.
	peers := map[string]map[string]string{"r1": {"rack": "a"}}
	withBGP.Spec.Announce.BGP = &v1alpha1.BGPAnnounce{PeerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}}
	if st := DesiredStatus(withBGP, find("good"), held, peers); !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionBGPValid) {
		t.Errorf("selector matching r1: conditions = %+v", st.Conditions)
	}
	withBGP.Spec.Announce.BGP.PeerSelector.MatchLabels["rack"] = "b"
	st = DesiredStatus(withBGP, find("good"), held, peers)
	c = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBGPValid)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "selects no BGPPeer") {
		t.Errorf("selector matching nothing: conditions = %+v", st.Conditions)
	}

	// Recomputing an unchanged status changes nothing (status is written only on change).
	items[0].Status = good
	if again := DesiredStatus(&items[0], find("good"), held, nil); !equalStatus(again, good) {
		t.Errorf("recomputed status differs:\n%+v\n%+v", again, good)
	}
}

func equalStatus(a, b v1alpha1.AddressPoolStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && *a.IPv4 == *b.IPv4 &&
		len(a.Conditions) == len(b.Conditions) && a.Conditions[0] == b.Conditions[0] && a.Conditions[1] == b.Conditions[1]
}
