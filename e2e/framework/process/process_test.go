package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/process"
)

func start(t *testing.T, script string) *process.Process {
	t.Helper()
	p, err := process.Start("/bin/sh", process.Options{Args: []string{"-c", script}, LogPath: filepath.Join(t.TempDir(), "sh.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// waitLog waits until the log holds text (the shell has run that far).
func waitLog(t *testing.T, p *process.Process, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(p.LogPath()); strings.Contains(string(b), text) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("log never showed %q:\n%s", text, p.LogTail())
}

func TestStopTermsFirst(t *testing.T) {
	p := start(t, `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("Exited is false after Stop")
	}
	tail := p.LogTail()
	if !strings.Contains(tail, "got-term") || !strings.Contains(tail, "exit status 3") {
		t.Errorf("want the TERM trap's output and exit status 3 in the tail, got:\n%s", tail)
	}
}

func TestStopKillsGroupAfterGrace(t *testing.T) {
	// The shell ignores TERM and has a child in its group: SIGKILL of the group ends both.
	p := start(t, `trap '' TERM; sleep 300 & echo "child $!"; wait`)
	waitLog(t, p, "child ")
	b, _ := os.ReadFile(p.LogPath())
	var child int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			child = n
		}
	}
	begin := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 200*time.Millisecond {
		t.Errorf("Stop returned after %v, before the grace period", d)
	}
	if !strings.Contains(p.Err().Error(), "killed") {
		t.Errorf("exit error %v, want killed", p.Err())
	}
	// The child is gone (or a zombie reaped by init): signal 0 fails once it is reaped.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(child, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the group survived SIGKILL", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWaitAndExitedProcess(t *testing.T) {
	p := start(t, `echo bye; exit 0`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("Stop of an exited process: %v", err)
	}
	if tail := p.LogTail(); !strings.Contains(tail, "exited: status 0") || !strings.Contains(tail, "bye") {
		t.Errorf("tail:\n%s", tail)
	}
}

func TestStartFailsWithoutLogOrBinary(t *testing.T) {
	if _, err := process.Start("/bin/true", process.Options{}); err == nil {
		t.Error("Start without a log path succeeded")
	}
	missing := filepath.Join(t.TempDir(), t.Name()) // no such program
	if _, err := process.Start(missing, process.Options{LogPath: filepath.Join(t.TempDir(), "x.log")}); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
}

func TestRun(t *testing.T) {
	out, err := process.Run(context.Background(), "/bin/sh", "-c", "echo out; echo err >&2; exit 2")
	if err == nil || !strings.Contains(out, "out") || !strings.Contains(out, "err") {
		t.Errorf("Run = %q, %v; want both streams and an error", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := process.Run(ctx, "/bin/sh", "-c", "sleep 30 & wait"); err == nil {
		t.Error("Run past its context succeeded")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Run returned %v after its context ended", d)
	}
}
