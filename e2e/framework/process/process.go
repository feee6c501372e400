// Package process supervises the binaries an end-to-end test or the demo runs in this network
// namespace (portico-controller, portico-ccm, etcd, kube-apiserver, moto_server, ...): one log
// file per process, its own process group and Pdeathsig=SIGKILL (so an interrupted test binary
// leaks nothing), stop by SIGTERM then SIGKILL of the group, and the log's tail for failure
// messages. Processes inside a lab namespace are netlab.Process: the lab owns and kills those.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// DefaultGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const DefaultGrace = 20 * time.Second

// killWait bounds the wait for a process after SIGKILL (a process stuck in the kernel).
const killWait = 10 * time.Second

// Options describe one process.
type Options struct {
	Name    string   // for messages and the default log name; default: the binary's base name
	Args    []string // without the binary
	Env     []string // nil: this process's environment
	Dir     string   // working directory; "": this process's
	LogPath string   // stdout and stderr, created or truncated; required by Start
	// Logf, when set, reports the start ("started NAME (pid N, log PATH)").
	Logf func(format string, args ...any)
}

// Process is one started binary.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error // valid once done is closed
}

// Start starts bin. The process runs in its own process group, gets SIGKILL when the thread
// that started it exits (Pdeathsig), and writes stdout and stderr to opts.LogPath.
func Start(bin string, opts Options) (*Process, error) {
	if opts.Name == "" {
		opts.Name = filepath.Base(bin)
	}
	if opts.LogPath == "" {
		return nil, fmt.Errorf("starting %s: no log path", opts.Name)
	}
	logFile, err := os.Create(opts.LogPath)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", opts.Name, err)
	}
	cmd := exec.Command(bin, opts.Args...)
	cmd.Env, cmd.Dir = opts.Env, opts.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", opts.Name, err)
	}
	p := &Process{name: opts.Name, logPath: opts.LogPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	if opts.Logf != nil {
		opts.Logf("started %s (pid %d, log %s)", p.name, cmd.Process.Pid, p.logPath)
	}
	return p, nil
}

// StartForTest is Start for tests: the log goes to tb's temporary directory unless
// opts.LogPath is set, a failure to start fails tb, and cleanup stops the process (SIGTERM,
// DefaultGrace, SIGKILL) and, when tb failed, logs the tail of its log.
func StartForTest(tb testing.TB, bin string, opts Options) *Process {
	tb.Helper()
	if opts.Name == "" {
		opts.Name = filepath.Base(bin)
	}
	if opts.LogPath == "" {
		opts.LogPath = filepath.Join(tb.TempDir(), fmt.Sprintf("%s-%d.log", opts.Name, time.Now().UnixNano()))
	}
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	p, err := Start(bin, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(DefaultGrace); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Logf("%s", p.LogTail())
		}
	})
	return p
}

// Name is the process's name in messages.
func (p *Process) Name() string { return p.name }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding its stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the exit error (nil for exit status 0); call it after Done is closed.
func (p *Process) Err() error { return p.exitErr }

// Wait waits until the process exits or ctx ends, and returns the exit error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitErr
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s to exit: %w", p.name, ctx.Err())
	}
}

// Signal sends sig to the process (not its group).
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	return nil
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs the process group, and waits for the
// exit. It returns nil when the process is gone (also when it had exited before), and an error
// only when it outlives SIGKILL.
func (p *Process) Stop(grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill SIGKILLs the process group and waits for the process to exit.
func (p *Process) Kill() error {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// tailBytes is how much of the log LogTail shows.
const tailBytes = 6000

// LogTail is the end of the log, headed by the process's name, state and log path.
func (p *Process) LogTail() string {
	state := "running"
	if p.Exited() {
		state = fmt.Sprintf("exited: %v", p.exitErr)
		if p.exitErr == nil {
			state = "exited: status 0"
		}
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("--- %s (%s): reading its log: %v ---", p.name, state, err)
	}
	prefix := ""
	if len(b) > tailBytes {
		b, prefix = b[len(b)-tailBytes:], "..."
	}
	return fmt.Sprintf("--- %s (%s) log tail, %s ---\n%s%s", p.name, state, p.logPath, prefix, b)
}

// Run runs bin to completion, at most until ctx ends (then it is killed with its group), with
// Pdeathsig, and returns its combined output.
func Run(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killWait
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("running %s: %w", filepath.Base(bin), err)
	}
	return string(out), nil
}
