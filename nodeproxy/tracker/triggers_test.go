package tracker

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func slice(addrType discoveryv1.AddressType, trigger string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: addrType}
	if trigger != "" {
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger}
	}
	return s
}

func version(s *discoveryv1.EndpointSlice, rv string) *discoveryv1.EndpointSlice {
	s.ResourceVersion = rv
	return s
}

func TestSliceTrigger(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := started.Add(1500 * time.Millisecond)
	at := later.Format(time.RFC3339Nano)
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	noService := slice(discoveryv1.AddressTypeIPv4, at)
	noService.Labels = nil
	cases := []struct {
		name   string
		old, s *discoveryv1.EndpointSlice
		want   *Trigger
	}{
		{"added IPv4", nil, slice(discoveryv1.AddressTypeIPv4, at), &Trigger{web, corev1.IPv4Protocol, later}},
		{"added IPv6", nil, slice(discoveryv1.AddressTypeIPv6, at), &Trigger{web, corev1.IPv6Protocol, later}},
		{"updated with a new time", version(slice(discoveryv1.AddressTypeIPv4, started.Format(time.RFC3339Nano)), "1"),
			version(slice(discoveryv1.AddressTypeIPv4, at), "2"), &Trigger{web, corev1.IPv4Protocol, later}},
		{"updated, same time (same second)", version(slice(discoveryv1.AddressTypeIPv4, at), "1"),
			version(slice(discoveryv1.AddressTypeIPv4, at), "2"), &Trigger{web, corev1.IPv4Protocol, later}},
		{"second resolution", nil, slice(discoveryv1.AddressTypeIPv4, "2026-01-02T03:04:07Z"),
			&Trigger{web, corev1.IPv4Protocol, started.Add(2 * time.Second)}},
		{"resync: same version", version(slice(discoveryv1.AddressTypeIPv4, at), "2"), version(slice(discoveryv1.AddressTypeIPv4, at), "2"), nil},
		{"no annotation", nil, slice(discoveryv1.AddressTypeIPv4, ""), nil},
		{"unparseable", nil, slice(discoveryv1.AddressTypeIPv4, "yesterday"), nil},
		{"before the tracker started", nil, slice(discoveryv1.AddressTypeIPv4, started.Add(-time.Second).Format(time.RFC3339Nano)), nil},
		{"at the tracker's start", nil, slice(discoveryv1.AddressTypeIPv4, started.Format(time.RFC3339Nano)), nil},
		{"FQDN slice", nil, slice(discoveryv1.AddressTypeFQDN, at), nil},
		{"no service label", nil, noService, nil},
	}
	for _, c := range cases {
		got, ok := sliceTrigger(c.old, c.s, started)
		switch {
		case c.want == nil && ok:
			t.Errorf("%s: trigger %+v, want none", c.name, got)
		case c.want != nil && !ok:
			t.Errorf("%s: no trigger, want %+v", c.name, *c.want)
		case c.want != nil && (got.Service != c.want.Service || got.Family != c.want.Family || !got.Time.Equal(c.want.Time)):
			t.Errorf("%s: trigger %+v, want %+v", c.name, got, *c.want)
		}
	}
}

// TestTriggersTakenOnce: triggers are handed out by the Take that takes their Service's mark,
// once; a deleted slice drops its Service's pending triggers (not others').
func TestTriggersTakenOnce(t *testing.T) {
	tr := NewForStore(nil, nil)
	at := func(d time.Duration) string { return tr.started.Add(d).Format(time.RFC3339Nano) }
	a := slice(discoveryv1.AddressTypeIPv4, at(time.Second))
	tr.SliceChanged(nil, a, false)
	b := slice(discoveryv1.AddressTypeIPv6, at(2*time.Second))
	b.Labels[discoveryv1.LabelServiceName] = "db"
	tr.SliceChanged(nil, b, false)
	tr.SliceChanged(a, version(slice(discoveryv1.AddressTypeIPv4, at(3*time.Second)), "2"), false)
	tr.SliceChanged(a, a, false) // resync: marks, no trigger

	changed, _, triggers := tr.Take()
	if len(changed) != 2 || len(triggers) != 3 {
		t.Fatalf("Take: changed %v, triggers %+v; want 2 Services and 3 triggers", changed, triggers)
	}
	if _, _, again := tr.Take(); len(again) != 0 {
		t.Errorf("second Take returned triggers %+v", again)
	}

	tr.SliceChanged(nil, slice(discoveryv1.AddressTypeIPv4, at(4*time.Second)), false)
	tr.SliceChanged(nil, b, false)
	tr.SliceChanged(nil, slice(discoveryv1.AddressTypeIPv4, ""), true) // web's slice deleted
	_, _, triggers = tr.Take()
	if len(triggers) != 1 || triggers[0].Service.Name != "db" {
		t.Errorf("after web's slice was deleted: triggers %+v, want db's only", triggers)
	}
}

func TestLatencies(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	triggers := []Trigger{
		{Family: corev1.IPv4Protocol, Time: now.Add(-250 * time.Millisecond)},
		{Family: corev1.IPv6Protocol, Time: now.Add(-time.Second)},
		{Family: corev1.IPv4Protocol, Time: now.Add(-2 * time.Second)},
	}
	if got := Latencies(triggers, corev1.IPv4Protocol, now); !slices.Equal(got, []float64{0.25, 2}) {
		t.Errorf("IPv4 latencies %v, want [0.25 2]", got)
	}
	if got := Latencies(triggers, corev1.IPv6Protocol, now); !slices.Equal(got, []float64{1}) {
		t.Errorf("IPv6 latencies %v, want [1]", got)
	}
}

// TestProgrammingLatencyBuckets: kube-proxy's boundaries (component-base MergeBuckets starts
// with 0).
func TestProgrammingLatencyBuckets(t *testing.T) {
	b := ProgrammingLatencyBuckets()
	if len(b) != 81 || b[0] != 0 || b[1] != 0.25 || b[2] != 0.5 || b[3] != 1 || b[61] != 59 || b[62] != 60 || b[73] != 115 || b[74] != 120 || b[80] != 300 {
		t.Errorf("buckets %v", b)
	}
	if !slices.IsSorted(b) {
		t.Errorf("buckets not sorted: %v", b)
	}
}
