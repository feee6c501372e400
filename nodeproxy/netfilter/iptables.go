package netfilter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/go-iptables/iptables"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// Netfilter is the agent's view of one family's iptables: transactions through
// iptables-restore, the owned chains through iptables-save, and the jump rules in the built-in
// chains through go-iptables.
type Netfilter interface {
	// Restore applies restore input with `iptables-restore --noflush`.
	Restore(ctx context.Context, input []byte) error
	// Save reads the owned chains and the built-in chains holding the jumps, as iptables-save
	// prints them.
	Save(ctx context.Context) (rules.Saved, error)
	// EnsureJump inserts j first in its chain unless it is present.
	EnsureJump(j rules.Jump) error
	// DeleteJump removes j if present.
	DeleteJump(j rules.Jump) error
}

var _ Netfilter = (*execNetfilter)(nil)

// execNetfilter runs the iptables binaries of one family.
type execNetfilter struct {
	restore, save string
	ipt           *iptables.IPTables
}

// NewExec returns the Netfilter of family run by the iptables binary (iptables or ip6tables,
// found in PATH or given as a path) and its -restore and -save siblings.
func NewExec(family rules.Family, binary string) (*execNetfilter, error) {
	proto := iptables.ProtocolIPv4
	if family == rules.IPv6 {
		proto = iptables.ProtocolIPv6
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", binary, err)
	}
	ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Path(path), iptables.Timeout(5))
	if err != nil {
		return nil, fmt.Errorf("setting up %s: %w", binary, err)
	}
	dir, base := filepath.Split(path)
	return &execNetfilter{
		restore: filepath.Join(dir, base+"-restore"),
		save:    filepath.Join(dir, base+"-save"),
		ipt:     ipt,
	}, nil
}

func (e *execNetfilter) Restore(ctx context.Context, input []byte) error {
	cmd := exec.CommandContext(ctx, e.restore, "--noflush")
	cmd.Stdin = bytes.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(e.restore), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Save runs iptables-save once for every table: on the nf_tables backend each run loads the
// whole ruleset, so one run costs what one table's does.
func (e *execNetfilter) Save(ctx context.Context) (rules.Saved, error) {
	cmd := exec.CommandContext(ctx, e.save)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", filepath.Base(e.save), err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", filepath.Base(e.save), err)
	}
	saved, parseErr := rules.ParseSave(stdout)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(e.save), err, strings.TrimSpace(stderr.String()))
	}
	if parseErr != nil {
		return nil, fmt.Errorf("reading %s output: %w", filepath.Base(e.save), parseErr)
	}
	return saved, nil
}

func (e *execNetfilter) EnsureJump(j rules.Jump) error {
	ok, err := e.ipt.Exists(j.Table, j.Chain, j.Spec...)
	if err != nil {
		return fmt.Errorf("checking jump in %s/%s: %w", j.Table, j.Chain, err)
	}
	if ok {
		return nil
	}
	if err := e.ipt.Insert(j.Table, j.Chain, 1, j.Spec...); err != nil {
		return fmt.Errorf("inserting jump in %s/%s: %w", j.Table, j.Chain, err)
	}
	return nil
}

func (e *execNetfilter) DeleteJump(j rules.Jump) error {
	if err := e.ipt.DeleteIfExists(j.Table, j.Chain, j.Spec...); err != nil {
		return fmt.Errorf("deleting jump in %s/%s: %w", j.Table, j.Chain, err)
	}
	return nil
}
