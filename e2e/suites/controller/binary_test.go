package controller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// buildController builds (or finds in the cache) cmd/portico-controller.
func buildController(t *testing.T) string {
	t.Helper()
	return gobuild.BinaryForTest(t, "cmd/portico-controller")
}

// TestBinaryServesMetricsAndProbes runs the real portico-controller binary: it provisions a
// Service, /healthz and /readyz answer 200, and /metrics has the provider-call and reconcile
// metrics with values.
func TestBinaryServesMetricsAndProbes(t *testing.T) {
	bin := buildController(t)
	e := newEnvNoController(t)
	metricsAddr, healthAddr := ports.AddrForTest(t), ports.AddrForTest(t)
	p := process.StartForTest(t, bin, process.Options{Name: "portico-controller", Args: []string{
		"--kubeconfig=" + testCluster.KubeconfigPath(), "--class=" + e.class + "=reference",
		"--reference-pool=198.18.190.0/24", "--leader-elect=true", "--leader-election-namespace=" + e.ns,
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + healthAddr}})
	t.Cleanup(func() { // before StartForTest's: the controller must stop on SIGTERM alone
		_ = p.Signal(syscall.SIGTERM)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _ = p.Wait(ctx); ctx.Err() != nil {
			t.Errorf("portico-controller did not stop on SIGTERM")
		}
	})

	e.create(e.lbService("web"))
	e.waitIngress("web")
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, "http://"+healthAddr+path); code != http.StatusOK {
			t.Errorf("%s = %d %s", path, code, body)
		}
	}
	_, metrics := httpGet(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{
		`portico_provider_calls_total{operation="ensure",outcome="success",provider="reference"} 1`,
		`portico_provider_call_duration_seconds_count{operation="ensure",provider="reference"} 1`,
		`controller_runtime_reconcile_total{controller="portico-service",result="success"}`,
		`controller_runtime_reconcile_time_seconds_count{controller="portico-service"}`,
		`leader_election_master_status{name="portico-controller"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestBinaryRejectsBadFlags: every configuration problem is listed at startup and the process
// exits without touching the cluster.
func TestBinaryRejectsBadFlags(t *testing.T) {
	bin := buildController(t)
	out, err := exec.Command(bin, "--kubeconfig="+testCluster.KubeconfigPath(), "--class=portico-lb.io/x=nosuch",
		"--workers=0", "--reference-pool=bad").CombinedOutput()
	if err == nil {
		t.Fatalf("bad flags accepted:\n%s", out)
	}
	for _, want := range []string{"config.classes[portico-lb.io/x]", "config.workers", "config.providers.reference.pool"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("startup error does not list %s:\n%s", want, out)
		}
	}
}

// TestBinaryStartupErrorsReadWell: command-line mistakes are named as a person would, and every
// startup error exits with config.ExitStartup (the code all Portico binaries share).
func TestBinaryStartupErrorsReadWell(t *testing.T) {
	bin := buildController(t)
	for _, tt := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--class=portico-lb.io/x=reference", "--resync-period=-1s"}, nil, `config.resyncPeriod: Invalid value: "-1s"`},
		{[]string{"--class=x=reference,x=reference"}, nil, `class "x" is given twice`},
		{[]string{"--class=portico-lb.io/x=reference", "stray"}, nil, `unexpected argument "stray"`},
		{[]string{"--no-such-flag"}, nil, "unknown flag: --no-such-flag"},
		{[]string{"--class=portico-lb.io/x=reference"}, []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}, "pass --kubeconfig=PATH"},
	} {
		cmd := exec.Command(bin, tt.args...)
		cmd.Env = append(append(os.Environ(), "KUBERNETES_SERVICE_HOST="), tt.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != config.ExitStartup {
			t.Errorf("%v: err = %v, want exit code %d\n%s", tt.args, err, config.ExitStartup, out)
		}
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: output lacks %q:\n%s", tt.args, tt.want, out)
		}
	}
}

// httpGet GETs url until it answers 200 (20 s at most) and returns the last answer.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	var code int
	var body string
	err := wait.Poll(context.Background(), 200*time.Millisecond, 20*time.Second, "GET "+url, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if err != nil && code == 0 {
		t.Fatal(err)
	}
	return code, body
}

// newEnvNoController prepares a namespace and class without starting an in-process controller.
func newEnvNoController(t *testing.T) *env {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	e := &env{t: t, ns: name, class: "portico-lb.io/" + name, cs: testCluster.Client()}
	if err := testCluster.EnsureNamespace(context.Background(), e.ns); err != nil {
		t.Fatal(err)
	}
	return e
}
