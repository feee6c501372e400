package addresspool

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/api/v1alpha1"
)

func apool(name string, age int, addrs ...string) v1alpha1.AddressPool {
	return v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1700000000+int64(age), 0))},
		Spec:       v1alpha1.AddressPoolSpec{Addresses: addrs},
	}
}

func TestParsePool(t *testing.T) {
	tests := []struct {
		name      string
		addrs     []string
		allowNB   bool
		problem   string // substring of the first problem; "" for a valid pool
		size4     int64
		size6     int64
		usable    []string
		notUsable []string
	}{
		{name: "v4 /24 avoids network and broadcast", addrs: []string{"198.18.10.0/24"}, size4: 254,
			usable: []string{"198.18.10.1", "198.18.10.254"}, notUsable: []string{"198.18.10.0", "198.18.10.255"}},
		{name: "v4 /24 with allowNetworkAndBroadcast", addrs: []string{"198.18.10.0/24"}, allowNB: true, size4: 256,
			usable: []string{"198.18.10.0", "198.18.10.255"}},
		{name: "v4 /31 has no network or broadcast", addrs: []string{"198.18.10.0/31"}, size4: 2, usable: []string{"198.18.10.0", "198.18.10.1"}},
		{name: "v4 /32", addrs: []string{"198.18.10.7/32"}, size4: 1, usable: []string{"198.18.10.7"}},
		{name: "range used whole", addrs: []string{"198.18.10.0-198.18.10.9"}, size4: 10, usable: []string{"198.18.10.0", "198.18.10.9"}},
		{name: "range with spaces", addrs: []string{"198.18.10.0 - 198.18.10.1"}, size4: 2},
		{name: "dual stack", addrs: []string{"198.18.10.0/30", "2001:db8:10::/120"}, size4: 2, size6: 256, usable: []string{"2001:db8:10::"}},
		{name: "huge v6 saturates", addrs: []string{"2001:db8::/32"}, size6: math.MaxInt64},
		{name: "host bits set", addrs: []string{"198.18.10.5/24"}, problem: "did you mean 198.18.10.0/24"},
		{name: "not an address", addrs: []string{"banana"}, problem: "must be a CIDR"},
		{name: "mixed range", addrs: []string{"198.18.10.1-2001:db8::1"}, problem: "mixes IPv4 and IPv6"},
		{name: "reversed range", addrs: []string{"198.18.10.9-198.18.10.1"}, problem: "end is before its start"},
		{name: "mapped v4", addrs: []string{"::ffff:198.18.10.0/120"}, problem: "dotted form"},
		{name: "overlap within pool", addrs: []string{"198.18.10.0/24", "198.18.10.10-198.18.10.20"}, problem: "overlaps 198.18.10.0/24"},
		{name: "empty", addrs: nil, problem: "at least one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := apool("p", 0, tt.addrs...)
			ap.Spec.AllowNetworkAndBroadcast = tt.allowNB
			p := Parse(&ap)
			if tt.problem != "" {
				if len(p.Problems) == 0 || !strings.Contains(p.Problems[0].Error(), tt.problem) {
					t.Fatalf("problems = %v, want one containing %q", p.Problems, tt.problem)
				}
				if p.Usable() {
					t.Error("an invalid pool is usable")
				}
				return
			}
			if len(p.Problems) > 0 {
				t.Fatalf("unexpected problems: %v", p.Problems)
			}
			if got := p.Size(corev1.IPv4Protocol); got != tt.size4 {
				t.Errorf("IPv4 size = %d, want %d", got, tt.size4)
			}
			if got := p.Size(corev1.IPv6Protocol); got != tt.size6 {
				t.Errorf("IPv6 size = %d, want %d", got, tt.size6)
			}
			for _, s := range tt.usable {
				if ok, _ := p.UsableAddr(netip.MustParseAddr(s)); !ok {
					t.Errorf("%s not usable", s)
				}
			}
			for _, s := range tt.notUsable {
				if ok, reserved := p.UsableAddr(netip.MustParseAddr(s)); ok || !reserved {
					t.Errorf("%s: usable=%v reserved=%v, want reserved", s, ok, reserved)
				}
			}
		})
	}
}

func TestParsePoolSelectors(t *testing.T) {
	ap := apool("p", 0, "198.18.10.0/24")
	ap.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{
		Priority:        -1,
		ServiceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}},
	}
	p := Parse(&ap)
	if len(p.Problems) != 2 {
		t.Fatalf("problems = %v, want the priority and the selector", p.Problems)
	}
	if !p.AutoAssign {
		t.Error("autoAssign must default to true")
	}
	ap.Spec.AutoAssign = ptr.To(false)
	if Parse(&ap).AutoAssign {
		t.Error("autoAssign=false ignored")
	}
}

func TestResolvePoolsConflicts(t *testing.T) {
	bad := apool("bad", 0, "nonsense")
	items := []v1alpha1.AddressPool{
		apool("young", 30, "198.18.10.128/25"),
		apool("old", 10, "198.18.10.0/24"),
		apool("other", 20, "198.18.11.0/24"),
		apool("v6", 5, "2001:db8:10::/120"),
		bad,
		apool("after-bad", 40, "198.18.12.0/24"),
		apool("twin-b", 50, "198.18.13.0/24"),
		apool("twin-a", 50, "198.18.13.0/24"),
	}
	items[4].Spec.Addresses = []string{"198.18.12.0/24", "nonsense"}
	pools := Resolve(items)
	got := map[string][]string{}
	for _, p := range pools {
		got[p.Name] = p.Conflicts
	}
	want := map[string][]string{"young": {"old"}, "twin-b": {"twin-a"}}
	for name, conflicts := range got {
		if !slices.Equal(conflicts, want[name]) {
			t.Errorf("%s conflicts = %v, want %v", name, conflicts, want[name])
		}
	}
	if !slices.IsSortedFunc(pools, func(a, b *Pool) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("pools not sorted by name")
	}
	if p := Containing(pools, netip.MustParseAddr("198.18.10.200")); p == nil || p.Name != "old" {
		t.Errorf("Containing prefers the usable pool, got %v", p)
	}
}

func TestUsage(t *testing.T) {
	ap := apool("p", 0, "198.18.10.0/29", "2001:db8:10::/126")
	p := Parse(&ap)
	held := []netip.Addr{
		netip.MustParseAddr("198.18.10.1"), netip.MustParseAddr("198.18.10.1"), // counted once
		netip.MustParseAddr("198.18.10.0"),   // network address held from before: assigned, not usable
		netip.MustParseAddr("198.18.11.1"),   // other pool
		netip.MustParseAddr("2001:db8:10::"), // v6
	}
	u := Usage(p, held)
	if got := u[corev1.IPv4Protocol]; got != (v1alpha1.FamilyUsage{Assigned: 2, Available: 5}) {
		t.Errorf("IPv4 usage = %+v, want assigned 2 available 5", got)
	}
	if got := u[corev1.IPv6Protocol]; got != (v1alpha1.FamilyUsage{Assigned: 1, Available: 3}) {
		t.Errorf("IPv6 usage = %+v, want assigned 1 available 3", got)
	}
	p.Conflicts = []string{"x"}
	if got := Usage(p, held)[corev1.IPv4Protocol]; got.Available != 0 || got.Assigned != 2 {
		t.Errorf("unusable pool usage = %+v, want nothing available", got)
	}
}
