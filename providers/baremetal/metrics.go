package baremetal

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/providers"
)

var poolAddressesDesc = prometheus.NewDesc(
	"portico_baremetal_pool_addresses",
	"Addresses of an address pool by IP family and state: assigned (held by Services) or available (can still be handed out).",
	[]string{"pool", "family", "state"}, nil,
)

// Collector returns a prometheus.Collector reporting pool usage as the provider's allocator
// sees it, computed at scrape time under the provider's lock.
func (p *Provider) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Provider }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- poolAddressesDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.p.mu.Lock()
	pools, held := c.p.pools, c.p.alloc.Held()
	c.p.mu.Unlock()
	for _, pool := range pools {
		for fam, u := range Usage(pool, held) {
			f := familyLabel(fam)
			ch <- prometheus.MustNewConstMetric(poolAddressesDesc, prometheus.GaugeValue, float64(u.Assigned), pool.Name, f, "assigned")
			ch <- prometheus.MustNewConstMetric(poolAddressesDesc, prometheus.GaugeValue, float64(u.Available), pool.Name, f, "available")
		}
	}
}

func familyLabel(f providers.IPFamily) string {
	if f == providers.IPv6 {
		return "ipv6"
	}
	return "ipv4"
}
