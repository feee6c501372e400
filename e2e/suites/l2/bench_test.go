package l2

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkL2Failover measures, per failure (agent killed, node's link cut) and family, the
// time from the failure until the client's neighbour entry for the VIP holds the new node's
// MAC (the client is served through it from then on), over -l2agent.trials trials, and counts
// the requests (new TCP connections every 50 ms) that failed in the 5 s after. Targets (issue
// 9): median under 1 s, worst under 2 s, no failed request.
func BenchmarkL2Failover(b *testing.B) {
	s := newScenario(b, "bench")
	winner := s.order[0]
	s.settle(b, winner)
	for _, failure := range []string{failureKill, failureLinkCut} {
		times := map[string][]time.Duration{}
		sent, failed := 0, 0
		for i := 0; i < *trials; i++ {
			res := s.trial(b, failure)
			for fam, d := range res.failover {
				times[fam] = append(times[fam], d)
			}
			sent, failed = sent+res.sent, failed+res.failed
			heal(b, failure, winner)
			s.settle(b, winner)
		}
		for _, fam := range []string{"IPv4", "IPv6"} {
			ds := slices.Clone(times[fam])
			slices.Sort(ds)
			med, worst := ds[len(ds)/2], ds[len(ds)-1]
			b.Logf("FIGURE %s %s failover: n=%d median %d ms, worst %d ms, all %v", failure, fam, len(ds), med.Milliseconds(), worst.Milliseconds(), ds)
			b.ReportMetric(float64(med.Milliseconds()), failure+"-"+fam+"-median-ms")
			b.ReportMetric(float64(worst.Milliseconds()), failure+"-"+fam+"-worst-ms")
		}
		b.Logf("FIGURE %s requests in the %v after the new node announced: %d sent, %d failed", failure, afterAnnounce, sent, failed)
		b.ReportMetric(float64(failed), failure+"-failed-requests")
	}
}
