package baremetal

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/providers"
)

var poolAddressesDesc = prometheus.NewDesc(
	"portico_baremetal_pool_addresses",
	"Addresses of an address pool by IP family and state: assigned (held by Services) or available (can still be handed out).",
	[]string{"pool", "family", "state"}, nil,
)

// Outcomes of an allocation, the values of the outcome label.
const (
	outcomeAssigned = "assigned" // the Service holds its addresses
	outcomePending  = "pending"  // exhausted or no pool for it: it waits
	outcomeInvalid  = "invalid"  // the Service must change
	outcomeError    = "error"    // reading the cluster failed
)

// metrics are the provider's own instruments, registered through Collector.
type metrics struct {
	allocation *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		allocation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portico_baremetal_allocation_duration_seconds",
			Help: "Time the bare-metal provider takes to decide a Service's addresses (one Ensure: reading the pools, " +
				"waiting for and holding the allocator's lock), by outcome (assigned, pending, invalid, error).",
			// 25 µs to about 1.6 s.
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17),
		}, []string{"outcome"}),
	}
}

// observeAllocation records one Ensure that started at start and ended with *err.
func (m *metrics) observeAllocation(start time.Time, err *error) {
	m.allocation.WithLabelValues(allocationOutcome(*err)).Observe(time.Since(start).Seconds())
}

func allocationOutcome(err error) string {
	var retry *providers.RetryError
	switch {
	case err == nil:
		return outcomeAssigned
	case providers.IsInvalid(err):
		return outcomeInvalid
	case errors.As(err, &retry):
		return outcomePending
	default:
		return outcomeError
	}
}

// Collector returns a prometheus.Collector for the provider's metrics: the allocation latency
// histogram, and pool usage per pool and family as the provider's allocator sees it, computed
// at scrape time.
func (p *Provider) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Provider }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolAddressesDesc
	c.p.metrics.allocation.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.p.metrics.allocation.Collect(ch)
	c.p.mu.Lock()
	pools, held := c.p.pools, c.p.alloc.Held()
	c.p.mu.Unlock()
	for _, pool := range pools {
		for fam, u := range addresspool.Usage(pool, held) {
			f := familyLabel(providers.IPFamily(fam))
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
