package netfilter

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// NATChains returns the names of every chain of the nat table, whoever owns it, as binary's
// -save sibling prints them (`iptables-save -t nat`): the agent reads it at startup to find
// another service proxy's rules (kube-proxy's KUBE-SERVICES), including those of the legacy
// backend, which nf_tables' netlink does not show. A missing binary reads as no chains.
func NATChains(ctx context.Context, binary string) ([]string, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, nil
	}
	dir, base := filepath.Split(path)
	save := filepath.Join(dir, base+"-save")
	var stderr bytes.Buffer
	args := []string{"-t", "nat"}
	cmd := exec.CommandContext(ctx, save, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t nat: %w: %s", filepath.Base(save), err, strings.TrimSpace(stderr.String()))
	}
	var chains []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, ":") {
			name, _, _ := strings.Cut(line[1:], " ")
			chains = append(chains, name)
		}
	}
	return chains, sc.Err()
}
