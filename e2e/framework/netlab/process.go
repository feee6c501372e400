package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a command running inside a lab namespace. Its stdout and stderr are kept in
// memory (Output) and logged line by line.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *output

	done    chan struct{} // closed when the process has been waited for
	waitErr error         // valid once done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start starts name with args inside h's namespace (through `ip netns exec`, so /sys shows the
// namespace's interfaces too). The process gets SIGKILL if this process dies, and is killed
// when the lab closes. Output lines go to the lab's Logf.
func (h *Host) Start(name string, args ...string) (*Process, error) {
	return h.start(h.lab.logf, name, args...)
}

// Run is Start for tests: it fails t if the process does not start, logs output lines with
// t.Logf, and kills the process when t (or the lab) ends.
func (h *Host) Run(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	p, err := h.start(t.Logf, name, args...)
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("netlab: %v", err)
		}
	})
	return p
}

func (h *Host) start(logf func(string, ...any), name string, args ...string) (*Process, error) {
	p := &Process{
		name: h.Name + "/" + filepath.Base(name),
		cmd:  nsCommand(context.Background(), h.NS, name, args...),
		out:  &output{changed: make(chan struct{})},
		done: make(chan struct{}),
	}
	p.out.logf = logf
	p.out.prefix = p.name
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	// A killed process's children may hold the pipe open; do not wait for them forever.
	p.cmd.WaitDelay = 5 * time.Second

	// Close waits for starts in flight, so it cannot miss a process.
	if err := h.lab.enter(); err != nil {
		return nil, err
	}
	defer h.lab.leave()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s in %s: %w", name, h.NS, err)
	}
	h.lab.addProcess(p)
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// nsCommand builds `ip netns exec NS name args...`. Pdeathsig kills the command if the thread
// that started it exits; Go only exits threads that end locked to a goroutine, which this
// package does only when a namespace switch could not be undone.
func nsCommand(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Pid is the process id (of the command itself: `ip netns exec` execs it).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns everything the process wrote so far.
func (p *Process) Output() string { s, _ := p.out.snapshot(); return s }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit error.
func (p *Process) Wait() error {
	<-p.done
	return p.waitErr
}

// WaitFor waits until the output contains text. It fails if the process exits first or ctx
// ends.
func (p *Process) WaitFor(ctx context.Context, text string) error {
	for {
		out, changed := p.out.snapshot()
		if strings.Contains(out, text) {
			return nil
		}
		select {
		case <-changed:
		case <-p.done:
			if strings.Contains(p.Output(), text) {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before printing %q; output:\n%s", p.name, p.waitErr, text, p.Output())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q from %s: %w; output:\n%s", text, p.name, ctx.Err(), p.Output())
		}
	}
}

// Stop kills the process with SIGKILL and waits for it. It is idempotent and returns nil
// when the process is gone, whether it exited before or was killed.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.stopErr = fmt.Errorf("killing %s: %w", p.name, err)
			return
		}
		<-p.done
		p.out.close()
	})
	return p.stopErr
}

// output collects a process's output, logs complete lines, and wakes waiters on each write.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	changed chan struct{} // closed and replaced on every write
	logf    func(string, ...any)
	prefix  string
	closed  bool // no more logging: the test that owns logf may have ended
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	if !o.closed && o.logf != nil {
		o.partial = append(o.partial, b...)
		for {
			i := bytes.IndexByte(o.partial, '\n')
			if i < 0 {
				break
			}
			o.logf("%s: %s", o.prefix, o.partial[:i])
			o.partial = o.partial[i+1:]
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

func (o *output) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String(), o.changed
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed && o.logf != nil && len(o.partial) > 0 {
		o.logf("%s: %s", o.prefix, o.partial)
	}
	o.closed = true
}
