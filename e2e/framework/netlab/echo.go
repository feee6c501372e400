package netlab

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
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

// echoServerBinary is the echo server, built once per source version into Portico's cache
// (e2e/framework/gobuild).
func echoServerBinary() (string, error) {
	return gobuild.Binary(context.Background(), echoServerPackage)
}
