// Package ports finds free TCP ports for the processes a test starts (apiservers, etcd,
// metrics and health listeners, moto). A port is free when the kernel hands it out for a
// listener on port 0; it is released before the caller binds it, so another process may in
// rare cases take it first: callers that start a server on it see that as a start failure.
package ports

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
)

// Loopback is where Free and Addr look.
var Loopback = netip.MustParseAddr("127.0.0.1")

// Free returns one free TCP port on 127.0.0.1.
func Free() (int, error) {
	p, err := FreeOn(Loopback, 1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// FreeOn returns n distinct free TCP ports on addr. All n listeners are open together, so the
// ports differ.
func FreeOn(addr netip.Addr, n int) ([]int, error) {
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		if err != nil {
			return nil, fmt.Errorf("finding a free port on %s: %w", addr, err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ForTest is Free that fails tb on error.
func ForTest(tb testing.TB) int {
	tb.Helper()
	p, err := Free()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// AddrForTest is a free "127.0.0.1:port", for --metrics-bind-address and the like.
func AddrForTest(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort(Loopback.String(), strconv.Itoa(ForTest(tb)))
}
