// Package latency puts a TCP proxy with added latency in front of a server, for tests of a
// client that meets a slow server (an API server under load, a far away one): everything the
// server sends reaches the client Delay late, in order; what the client sends passes at once.
// It works below TLS, so the client's certificates and the server's name checks are
// unchanged. Hand-written rather than an emulator (toxiproxy) for one fault: an HTTP API and a
// server to run for a function of a few lines.
package latency

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards every connection it accepts to its upstream, delaying the upstream's bytes.
type Proxy struct {
	l        net.Listener
	upstream string
	delay    time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Start listens on listen ("host:port", port 0 for a free one) and forwards to upstream.
func Start(listen, upstream string, delay time.Duration) (*Proxy, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("latency proxy: %w", err)
	}
	p := &Proxy{l: l, upstream: upstream, delay: delay, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// StartForTest is Start, failing tb on an error and closing the proxy when tb ends.
func StartForTest(tb testing.TB, listen, upstream string, delay time.Duration) *Proxy {
	tb.Helper()
	p, err := Start(listen, upstream, delay)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track records c for Close; false when the proxy is closing (c is closed then).
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		return
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(server) {
		p.untrack(client)
		return
	}
	defer p.untrack(client, server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(server, client)
		if tc, ok := server.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	delayedCopy(client, server, p.delay)
	client.Close()
	<-done
}

// chunk is what one read returned, due at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// delayedCopy copies src to dst, writing each chunk delay after it was read, in order. The
// wait is the fault this package injects.
func delayedCopy(dst, src net.Conn, delay time.Duration) {
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{b: buf[:n], due: time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range chunks {
		if failed {
			continue // drain, so the reader ends
		}
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			<-t.C
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.Close()
		}
	}
}
