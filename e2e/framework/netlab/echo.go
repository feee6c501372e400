package netlab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-lb/portico/internal/prereq"
)

// echoServerPackage is the echo server every lab process runs for StartEchoServer.
const echoServerPackage = "github.com/portico-lb/portico/e2e/tools/echoserver"

// StartEchoServer runs the echo server (e2e/tools/echoserver) in h's namespace, named h.Name,
// listening on ports for proto ("tcp" or "udp") on all addresses, and waits until it listens.
// It fails t on error; the server is killed when t ends.
func (h *Host) StartEchoServer(t testing.TB, proto string, ports ...int) *Process {
	t.Helper()
	if (proto != "tcp" && proto != "udp") || len(ports) == 0 {
		t.Fatalf("netlab: StartEchoServer wants \"tcp\" or \"udp\" and ports, got %q %v", proto, ports)
	}
	bin, err := echoServerBinary()
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	p := h.Run(t, bin, "-name", h.Name, "-"+proto, strings.Join(ps, ","))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.WaitFor(ctx, "ready"); err != nil {
		t.Fatalf("netlab: echo server in %s: %v", h.Name, err)
	}
	return p
}

var echoBuild struct {
	once sync.Once
	path string
	err  error
}

// echoServerBinary builds the echo server once per process into
// <cache>/echoserver-<hash>/echoserver (the cache of internal/prereq.CacheDir, ~/.cache/portico
// by default), where hash covers its source and the Go version, and reuses a binary an earlier
// process built from the same source. Nothing is left in the temporary directory.
func echoServerBinary() (string, error) {
	echoBuild.once.Do(func() {
		echoBuild.path, echoBuild.err = buildEchoServer(prereq.CacheDir())
	})
	return echoBuild.path, echoBuild.err
}

func buildEchoServer(cache string) (string, error) {
	srcDir, key, err := echoServerSource()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "echoserver-"+key)
	bin := filepath.Join(dir, "echoserver")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating echo server dir: %w", err)
	}
	// Build beside the target and rename: concurrent test processes never run a half-written
	// binary.
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, echoServerPackage)
	cmd.Dir = srcDir
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building echo server: %w: %s", err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("installing echo server: %w", err)
	}
	return bin, nil
}

// echoServerSource finds the echo server's source directory (with go list, so that it works in
// -trimpath builds too) and hashes its Go files and the Go version.
func echoServerSource() (dir, key string, err error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", echoServerPackage).Output()
	if err != nil {
		return "", "", fmt.Errorf("finding the echo server's source: go list %s: %w", echoServerPackage, err)
	}
	dir = strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return "", "", fmt.Errorf("finding the echo server's source: no Go files in %s", dir)
	}
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", "", fmt.Errorf("hashing the echo server's source: %w", err)
		}
		fmt.Fprintln(h, filepath.Base(f), len(b))
		h.Write(b)
	}
	return dir, hex.EncodeToString(h.Sum(nil))[:12], nil
}
