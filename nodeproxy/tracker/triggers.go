package tracker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Trigger is one EndpointSlice change the rules have to catch up with: when the change that
// caused it happened, by the slice's endpoints.kubernetes.io/last-change-trigger-time annotation
// (corev1.EndpointsLastChangeTriggerTime, RFC 3339 with nanoseconds, set by the EndpointSlice
// controller to the time of the Pod or Service change behind the update), and the slice's
// address family. Network programming latency is the time from Time to the sync that programmed
// the family's rules for it.
type Trigger struct {
	Service types.NamespacedName
	Family  corev1.IPFamily
	Time    time.Time
}

// sliceTrigger is the Trigger an added (old nil) or updated EndpointSlice brings, if any, as
// kube-proxy counts them: only slices of an IP family, with a parseable annotation, for changes
// made after the tracker started (older ones would measure how long the agent was down), and
// only for a new version of the slice: an informer's resync replays the same version (same
// resourceVersion), which kube-proxy's cache sees as no change. The annotation may repeat from
// one version to the next (it comes from Pod and Service times, kept to the second), and each
// version is a change to program.
func sliceTrigger(old, s *discoveryv1.EndpointSlice, started time.Time) (Trigger, bool) {
	var fam corev1.IPFamily
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
		fam = corev1.IPv4Protocol
	case discoveryv1.AddressTypeIPv6:
		fam = corev1.IPv6Protocol
	default:
		return Trigger{}, false
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	v, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]
	if name == "" || !ok || (old != nil && old.ResourceVersion == s.ResourceVersion) {
		return Trigger{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !t.After(started) {
		return Trigger{}, false
	}
	return Trigger{Service: types.NamespacedName{Namespace: s.Namespace, Name: name}, Family: fam, Time: t}, true
}

// dropTriggers removes svc's pending triggers: a deleted slice's annotation dates from its last
// update, not from the deletion, so kube-proxy forgets the Service's pending times then.
func dropTriggers(pending []Trigger, svc types.NamespacedName) []Trigger {
	out := pending[:0]
	for _, t := range pending {
		if t.Service != svc {
			out = append(out, t)
		}
	}
	return out
}

// ProgrammingLatency is portico_agent_network_programming_duration_seconds, kube-proxy's
// kubeproxy_network_programming_duration_seconds under the agent's prefix: per IP family, the
// seconds from each Trigger to the end of the sync that programmed that family's rules, observed
// once per changed slice per successful sync of the family by the proxier of either mode. The
// same observations go to kubeproxy_network_programming_duration_seconds, kube-proxy's name
// (without the family label, as kube-proxy has it), for kube-proxy's dashboards.
type ProgrammingLatency struct {
	hist      *prometheus.HistogramVec
	kubeProxy prometheus.Histogram
}

// ProgrammingLatencyBuckets are kube-proxy's: 0, 0.25 s, 0.5 s, every second to 59 s, every 5 s
// to 115 s, every 30 s to 5 min.
func ProgrammingLatencyBuckets() []float64 {
	b := []float64{0}
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

// NewProgrammingLatency creates the histograms and registers them with reg (nil: not
// registered).
func NewProgrammingLatency(reg prometheus.Registerer) *ProgrammingLatency {
	l := &ProgrammingLatency{
		hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portico_agent_network_programming_duration_seconds",
			Help:    "Seconds from an EndpointSlice change's trigger time (endpoints.kubernetes.io/last-change-trigger-time) to the sync that programmed it, per IP family.",
			Buckets: ProgrammingLatencyBuckets()}, []string{"ip_family"}),
		kubeProxy: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubeproxy_network_programming_duration_seconds",
			Help:    "Seconds from an EndpointSlice change's trigger time (endpoints.kubernetes.io/last-change-trigger-time) to the sync that programmed it (kube-proxy's name; portico_agent_network_programming_duration_seconds has the IP family).",
			Buckets: ProgrammingLatencyBuckets()}),
	}
	if reg != nil {
		reg.MustRegister(l.hist, l.kubeProxy)
	}
	return l
}

// Latencies are the seconds from each of triggers of family fam to now: the values Programmed
// observes.
func Latencies(triggers []Trigger, fam corev1.IPFamily, now time.Time) []float64 {
	var out []float64
	for _, t := range triggers {
		if t.Family == fam {
			out = append(out, now.Sub(t.Time).Seconds())
		}
	}
	return out
}

// Programmed observes the latency of st's triggers of family fam: call it once the family's
// rules for st are in the kernel. A nil ProgrammingLatency observes nothing.
func (l *ProgrammingLatency) Programmed(st *State, fam corev1.IPFamily) {
	if l == nil || st == nil {
		return
	}
	for _, s := range Latencies(st.Triggers, fam, time.Now()) {
		l.hist.WithLabelValues(string(fam)).Observe(s)
		l.kubeProxy.Observe(s)
	}
}
