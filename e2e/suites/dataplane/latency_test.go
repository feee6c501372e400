package dataplane_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNetworkProgrammingLatency: an endpoint change (a Pod turning Ready) reaches the agent's
// portico_agent_network_programming_duration_seconds: the histogram counts it, and the value is
// the time from the change (the EndpointSlice's last-change-trigger-time, the Pod's Ready
// transition, which the API keeps to the second) to the sync that programmed it: more than 0,
// less than the time the test waited plus that second.
func TestNetworkProgrammingLatency(t *testing.T) { forModes(t, testNetworkProgrammingLatency) }

func testNetworkProgrammingLatency(t *testing.T) {
	const name, family = "portico_agent_network_programming_duration_seconds", `ip_family="IPv4"`
	e := newEnv(t)
	agentsUp := time.Now() // the mode's agents started before this
	e.backend(e.node1, "a", "npl")
	client := e.pod(e.node1, "client")
	svc := e.service("npl", "npl")
	e.reach(&client.Host, "tcp", addrPort(clusterIP(svc), 80))

	// Before any change the series may not exist yet (a histogram shows a family once observed).
	read := func() (count, sum float64) {
		count, errC := e.metric(e.node1, name+"_count", family)
		sum, errS := e.metric(e.node1, name+"_sum", family)
		if errC != nil || errS != nil {
			return 0, 0
		}
		return count, sum
	}
	// Trigger times are kept to the second, and an agent measures no change made before it
	// started (as kube-proxy): the change must fall in a later second than the agents' start.
	e.eventually("a second after the agents started", 3*time.Second, func() error {
		if now := time.Now().Truncate(time.Second); !now.After(agentsUp) {
			return fmt.Errorf("still in the second of %s", agentsUp.Format(time.StampMilli))
		}
		return nil
	})
	count0, sum0 := read()
	start := time.Now()
	e.backend(e.node2, "b", "npl")
	var count, sum float64
	defer func() {
		if t.Failed() {
			list, _ := e.cs.DiscoveryV1().EndpointSlices(e.ns).List(e.ctx, metav1.ListOptions{})
			for _, sl := range list.Items {
				t.Logf("slice %s: %d endpoints, annotations %v", sl.Name, len(sl.Endpoints), sl.Annotations)
			}
		}
	}()
	e.eventually("the agent on "+e.node1.Name+" observes the endpoint change", 30*time.Second, func() error {
		var err error
		if count, err = e.metric(e.node1, name+"_count", family); err != nil {
			return err
		}
		if sum, err = e.metric(e.node1, name+"_sum", family); err != nil {
			return err
		}
		if count <= count0 {
			return fmt.Errorf("%s_count still %v", name, count)
		}
		return nil
	})
	waited := time.Since(start)
	mean := (sum - sum0) / (count - count0)
	t.Logf("%v new observation(s), mean %.3f s, test waited %v", count-count0, mean, waited.Round(time.Millisecond))
	if mean <= 0 || mean >= (waited+time.Second).Seconds() {
		t.Errorf("network programming latency %.3f s, want more than 0 and less than the %v waited plus the trigger time's second", mean, waited.Round(time.Millisecond))
	}
}
