package ports_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/portico-lb/portico/e2e/framework/ports"
)

func TestFreeOnDistinctAndBindable(t *testing.T) {
	got, err := ports.FreeOn(ports.Loopback, 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range got {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct valid ports", got)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

func TestAddrForTest(t *testing.T) {
	addr := ports.AddrForTest(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("AddrForTest = %q (%v)", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s is not free: %v", addr, err)
	}
	l.Close()
}
