package l2

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-lb/portico/config"
)

// TestStartupErrors: the real binary refuses bad announcement settings at startup, listing every
// problem, and refuses --announce against a cluster without the AddressPool CRD instead of
// waiting for it silently.
func TestStartupErrors(t *testing.T) {
	setup(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--hostname-override=node1", "--announce=l2,bgpp"},
			[]string{"config.announcers[0]: Invalid value: \"l2\": needs --membership", `config.announcers[1]: Unsupported value: "bgpp"`}},
		{[]string{"--hostname-override=node1", "--announce=l2", "--membership", "--membership-probe-timeout=1s", "--membership-port=0",
			"--membership-secret-file=/nonexistent"},
			[]string{"config.membership.probeTimeout", "config.membership.port", "config.membership.secretFile"}},
	}
	for _, c := range cases {
		out, err := exec.Command(shared.Agent, c.args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != config.ExitStartup {
			t.Errorf("%v: err = %v, want exit code %d\n%s", c.args, err, config.ExitStartup, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}

	// A token the apiserver does not know: listing AddressPools fails, as it does without the
	// CRD or without the RBAC for it (the shared cluster has the CRD), and the agent says so at
	// startup instead of waiting for an informer that never syncs.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := shared.Cluster.WriteKubeconfigWithToken(kubeconfig, shared.Cluster.Host(), "no-such-token"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(shared.Agent, "--kubeconfig="+kubeconfig, "--hostname-override=node1", "--announce=l2", "--membership").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != config.ExitStartup {
		t.Errorf("without access to AddressPools: err = %v, want exit code %d\n%s", err, config.ExitStartup, out)
	}
	if !strings.Contains(string(out), "--announce needs AddressPools") {
		t.Errorf("without access to AddressPools: output lacks the reason:\n%s", out)
	}
}
