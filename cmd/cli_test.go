// Package cmd_test runs the three built binaries to check the command line they share: --version
// (the version make build links in), --logging-format=json, and bad flags.
package cmd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var binaries = []string{"portico-agent", "portico-controller", "portico-ccm"}

const testVersion = "v0.0.0-clitest"

// build builds every binary once into a temporary directory with the version set as make build
// sets it. It builds with the environment's cgo setting (not make build's CGO_ENABLED=0), as
// go vet and the e2e harness (e2e/framework/gobuild) do, so that on a cold machine the three
// share one compilation of the dependencies instead of two.
func build(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range binaries {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b),
			"-ldflags", "-X github.com/portico-lb/portico/internal/version.version="+testVersion, "./"+b)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b, err, out)
		}
	}
	return dir
}

func TestCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the three binaries")
	}
	dir := build(t)
	t.Run("version", func(t *testing.T) {
		for _, b := range binaries {
			out, err := exec.Command(filepath.Join(dir, b), "--version").CombinedOutput()
			if err != nil {
				t.Errorf("%s --version: %v\n%s", b, err, out)
			}
			if got, want := strings.TrimSpace(string(out)), b+" "+testVersion; got != want {
				t.Errorf("%s --version printed %q, want %q", b, got, want)
			}
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		for _, b := range binaries {
			out, err := exec.Command(filepath.Join(dir, b), "--no-such-flag").CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("%s --no-such-flag: err = %v, want exit status 1\n%s", b, err, out)
			}
			if !strings.Contains(string(out), "unknown flag: --no-such-flag") {
				t.Errorf("%s --no-such-flag: output does not name the flag:\n%s", b, out)
			}
		}
	})
	t.Run("json logs", func(t *testing.T) {
		tmp := t.TempDir()
		kubeconfig := filepath.Join(tmp, "kubeconfig")
		// An API server that refuses connections: the binaries start and log their failures.
		if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
			t.Fatal(err)
		}
		cloudConfig := filepath.Join(tmp, "cloud.yaml")
		if err := os.WriteFile(cloudConfig, []byte("provider: reference\nreference:\n  pool: 198.18.128.0/24\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := map[string][]string{
			"portico-agent": {"--kubeconfig=/nonexistent/kubeconfig", "--hostname-override=node1"},
			"portico-controller": {"--kubeconfig=" + kubeconfig, "--class=portico-lb.io/x=reference",
				"--metrics-bind-address=0", "--health-probe-bind-address=0"},
			"portico-ccm": {"--kubeconfig=" + kubeconfig, "--cloud-provider=portico", "--cloud-config=" + cloudConfig,
				"--secure-port=0"},
		}
		for _, b := range binaries {
			line := firstLogLine(t, filepath.Join(dir, b), append(args[b], "--logging-format=json")...)
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil || entry["msg"] == nil {
				t.Errorf("%s --logging-format=json: first log line is not a JSON entry with msg (%v): %s", b, err, line)
			}
		}
	})
}

// firstLogLine runs bin until it writes a line to standard error, and returns that line.
func firstLogLine(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() {
		t.Fatalf("%s %v wrote nothing to standard error: %v", filepath.Base(bin), args, sc.Err())
	}
	return sc.Text()
}
