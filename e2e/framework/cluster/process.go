package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane binary, logging to a file in the cluster directory. It is killed
// by the kernel if the test process dies (Pdeathsig), so an interrupted run leaks nothing.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	exitErr error
}

func (c *Cluster) start(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(c.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	c.logf("started %s (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return p, nil
}

func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New(p.name + " did not exit after SIGKILL")
	}
}

func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
