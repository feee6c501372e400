package nodeproxy

import (
	"net"
	"strings"
	"testing"

	"github.com/portico-lb/portico/config"
)

// TestPortInUse: an agent whose /healthz or /metrics port is taken (kube-proxy holds the same
// ones) fails at once, naming the address, the likely holder and the setting that moves it.
func TestPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	for _, tc := range []struct {
		cfg  config.Agent
		want []string
	}{
		{config.Agent{HealthzBindAddress: addr, MetricsBindAddress: "0"},
			[]string{addr, "another process holds the port", "kube-proxy", "--healthz-bind-address", "healthzBindAddress", "agent.healthzPort", "address already in use"}},
		{config.Agent{HealthzBindAddress: "127.0.0.1:0", MetricsBindAddress: addr},
			[]string{addr, "another process holds the port", "kube-proxy", "--metrics-bind-address", "metricsBindAddress", "agent.metricsBindAddress"}},
	} {
		a := &agent{cfg: tc.cfg}
		ls, err := a.listen()
		if err == nil {
			ls.health.Close()
			ls.metrics.Close()
			t.Fatalf("%+v: listen succeeded on a held port", tc.cfg)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
}
