package l2

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-lb/portico/config"
)

// TestStartupErrors: the real binary refuses bad announcement settings at startup, listing every
// problem, and says why it cannot list AddressPools (credentials refused, API server
// unreachable) instead of waiting for them silently.
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

	// Listing AddressPools at startup fails for different reasons, and the agent names the one
	// it met instead of waiting for an informer that never syncs: a token the API server does
	// not know is refused credentials, not a missing CRD; an address nothing listens on is an
	// API server the agent cannot reach, with the setting that moves it.
	dir := t.TempDir()
	badToken := filepath.Join(dir, "bad-token")
	if err := shared.Cluster.WriteKubeconfigWithToken(badToken, shared.Cluster.Host(), "no-such-token"); err != nil {
		t.Fatal(err)
	}
	closed := closedAddress(t)
	unreachable := filepath.Join(dir, "unreachable")
	if err := shared.Cluster.WriteKubeconfigWithToken(unreachable, "https://"+closed, "no-such-token"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kubeconfig, want, lack string }{
		{badToken, "refused the agent's credentials", "needs AddressPools"},
		{unreachable, "cannot reach the API server at https://" + closed + " (set the chart's agent.apiServer", "needs AddressPools"},
	} {
		args := []string{"--kubeconfig=" + c.kubeconfig, "--hostname-override=node1", "--announce=l2", "--membership"}
		out, err := exec.Command(shared.Agent, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != config.ExitStartup {
			t.Errorf("%s: err = %v, want exit code %d\n%s", filepath.Base(c.kubeconfig), err, config.ExitStartup, out)
		}
		if !strings.Contains(string(out), c.want) || strings.Contains(string(out), c.lack) {
			t.Errorf("%s: output should say %q (and not %q):\n%s", filepath.Base(c.kubeconfig), c.want, c.lack, out)
		}
	}
}

// closedAddress is a loopback address and port nothing listens on (one the kernel just gave
// and took back).
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
