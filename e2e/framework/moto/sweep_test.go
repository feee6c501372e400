package moto

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepKillsOnlyLeftoverServers: a directory of a dead owner is removed and the process
// named in its pid file is killed only if its environment names that directory (a recycled pid
// survives); directories of live owners are kept.
func TestSweepKillsOnlyLeftoverServers(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadDir := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(dead.Process.Pid)+"-sweeptest")
	otherDir := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(dead.Process.Pid)+"-sweeptest2")
	liveDir := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(os.Getpid())+"-sweeptest")
	for _, d := range []string{deadDir, otherDir, liveDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	start := func(env string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd
	}
	leftover := start(envDir + "=" + deadDir)
	stranger := start("UNRELATED=1") // as if the pid had been recycled
	for dir, cmd := range map[string]*exec.Cmd{deadDir: leftover, otherDir: stranger} {
		if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- leftover.Wait() }()

	sweep()

	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the leftover server of a dead owner is still running")
	}
	if err := stranger.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a process not started for the swept directory was killed: %v", err)
	}
	for _, d := range []string{deadDir, otherDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("directory %s of a dead owner survived: %v", d, err)
		}
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Errorf("directory of a live owner removed: %v", err)
	}
}

// TestCheckBinaryNamesTheFix: a missing moto_server, or one of another version, is an error
// that names the command installing the pinned one.
func TestCheckBinaryNamesTheFix(t *testing.T) {
	dir := t.TempDir()
	err := checkBinary(filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "make prereqs") || !strings.Contains(err.Error(), "moto[server]==5.2.5") {
		t.Errorf("missing binary: %v", err)
	}
	python := filepath.Join(dir, "python3")
	server := filepath.Join(dir, "moto_server")
	if err := os.WriteFile(python, []byte("#!/bin/sh\necho 5.2.1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(server, []byte("#!"+python+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = checkBinary(server)
	if err == nil || !strings.Contains(err.Error(), "is moto 5.2.1, want 5.2.5") || !strings.Contains(err.Error(), "make prereqs") {
		t.Errorf("wrong version: %v", err)
	}
	if err := checkBinary(Binary()); err != nil {
		t.Errorf("the installed moto_server: %v", err)
	}
}
