package bgp

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsPrefix matches portico-agent's other metrics.
const metricsPrefix = "portico_agent_bgp_"

var (
	sessionDesc = prometheus.NewDesc(metricsPrefix+"session_state",
		"BGP session state per peer: 1 for the current state, 0 for the others.", []string{"peer", "state"}, nil)
	bfdDesc = prometheus.NewDesc(metricsPrefix+"bfd_state",
		"BFD session state per peer: 1 for the current state (Disabled without BFD), 0 for the others.", []string{"peer", "state"}, nil)
	advertisedDesc = prometheus.NewDesc(metricsPrefix+"advertised_prefixes",
		"Prefixes currently advertised to the peer.", []string{"peer"}, nil)
	announcedDesc = prometheus.NewDesc(metricsPrefix+"announced_prefixes",
		"Prefixes the speaker announces (to every established peer of their family).", nil, nil)
)

// scrapeTimeout bounds the Status call of one scrape.
const scrapeTimeout = 5 * time.Second

// collector reads the speaker's Status on every scrape.
type collector struct{ s *Speaker }

// Collector returns the speaker's Prometheus collector: session and BFD state per peer (as
// state sets), prefixes advertised per peer, prefixes announced, withdrawals, and peers recreated by the BFD guard. Options.
// Registerer registers it; use this to register it elsewhere.
func (s *Speaker) Collector() prometheus.Collector { return collector{s} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionDesc
	ch <- bfdDesc
	ch <- advertisedDesc
	ch <- announcedDesc
	c.s.withdrawals.Describe(ch)
	c.s.recreations.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.s.withdrawals.Collect(ch)
	c.s.recreations.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	st, err := c.s.Status(ctx)
	if err != nil {
		// Stopped, or GoBGP did not answer: the scrape shows the series as absent.
		return
	}
	ch <- prometheus.MustNewConstMetric(announcedDesc, prometheus.GaugeValue, float64(st.Advertisements))
	for _, p := range st.Peers {
		peer := p.Address.String()
		for _, state := range sessionStates {
			ch <- prometheus.MustNewConstMetric(sessionDesc, prometheus.GaugeValue, boolValue(p.State == state), peer, string(state))
		}
		for _, state := range bfdStates {
			ch <- prometheus.MustNewConstMetric(bfdDesc, prometheus.GaugeValue, boolValue(p.BFD == state), peer, string(state))
		}
		ch <- prometheus.MustNewConstMetric(advertisedDesc, prometheus.GaugeValue, float64(p.Advertised), peer)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
