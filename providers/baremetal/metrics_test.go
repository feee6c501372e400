package baremetal_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
)

// TestMetrics: the pool-usage gauges per pool and family follow allocations, and every Ensure
// lands in the allocation histogram under its outcome.
func TestMetrics(t *testing.T) {
	src := &staticSource{pools: []v1alpha1.AddressPool{
		pool("dual", "198.18.3.0-198.18.3.3", "2001:db8:3::-2001:db8:3::3"),
		pool("small", "198.18.4.0-198.18.4.1"),
	}}
	p := baremetal.New(baremetal.Options{Source: src})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(p.Collector()); err != nil {
		t.Fatal(err)
	}
	ensure := func(name string, ann string, fams ...providers.IPFamily) error {
		lb := &providers.LoadBalancer{Ref: providers.Ref{Namespace: "ns", Name: name, UID: name}, IPFamilies: fams,
			Ports: []providers.Port{{Protocol: providers.TCP, Port: 80}}}
		lb.Options = baremetal.ServiceOptions{AddressPool: ann}
		_, err := p.Ensure(context.Background(), lb)
		return err
	}
	for _, c := range []struct {
		name, pool string
		fams       []providers.IPFamily
		ok         bool
	}{
		{"a", "dual", []providers.IPFamily{providers.IPv4, providers.IPv6}, true},
		{"b", "dual", []providers.IPFamily{providers.IPv4}, true},
		{"c", "small", []providers.IPFamily{providers.IPv4}, true},
		{"d", "small", []providers.IPFamily{providers.IPv4}, true},
		{"e", "small", []providers.IPFamily{providers.IPv4}, false}, // exhausted: pending
		{"f", "small", []providers.IPFamily{providers.IPv6}, false}, // no IPv6 in it: invalid
	} {
		if err := ensure(c.name, c.pool, c.fams...); (err == nil) != c.ok {
			t.Fatalf("Ensure %s = %v, want success %v", c.name, err, c.ok)
		}
	}
	want := `
# HELP portico_baremetal_pool_addresses Addresses of an address pool by IP family and state: assigned (held by Services) or available (can still be handed out).
# TYPE portico_baremetal_pool_addresses gauge
portico_baremetal_pool_addresses{family="ipv4",pool="dual",state="assigned"} 2
portico_baremetal_pool_addresses{family="ipv4",pool="dual",state="available"} 2
portico_baremetal_pool_addresses{family="ipv4",pool="small",state="assigned"} 2
portico_baremetal_pool_addresses{family="ipv4",pool="small",state="available"} 0
portico_baremetal_pool_addresses{family="ipv6",pool="dual",state="assigned"} 1
portico_baremetal_pool_addresses{family="ipv6",pool="dual",state="available"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "portico_baremetal_pool_addresses"); err != nil {
		t.Error(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "portico_baremetal_allocation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if want := map[string]uint64{"assigned": 4, "pending": 1, "invalid": 1}; !maps.Equal(counts, want) {
		t.Errorf("allocation histogram counts by outcome = %v, want %v", counts, want)
	}
}
