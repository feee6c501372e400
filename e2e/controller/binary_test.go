package controller_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/config"
)

// buildController builds cmd/portico-controller into a temporary directory.
func buildController(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "portico-controller")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/portico-controller").CombinedOutput()
	if err != nil {
		t.Fatalf("building portico-controller: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestBinaryServesMetricsAndProbes runs the real portico-controller binary: it provisions a
// Service, /healthz and /readyz answer 200, and /metrics has the provider-call and reconcile
// metrics with values.
func TestBinaryServesMetricsAndProbes(t *testing.T) {
	bin := buildController(t)
	e := newEnvNoController(t)
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--kubeconfig="+testCluster.KubeconfigPath(), "--class="+e.class+"=reference",
		"--reference-pool=198.18.190.0/24", "--leader-elect=true", "--leader-election-namespace="+e.ns,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+healthAddr)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("portico-controller did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("portico-controller log:\n%s", logs.String())
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

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	var code int
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, body = resp.StatusCode, string(b)
		}
		cancel()
		if (err == nil && code == http.StatusOK) || time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			return code, body
		}
		time.Sleep(200 * time.Millisecond)
	}
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
