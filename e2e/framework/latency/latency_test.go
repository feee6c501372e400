package latency

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestDelaysAnswers: an echo server behind the proxy answers each line delay late, and the
// answers come in order.
func TestDelaysAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					if _, err := c.Write(append(s.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	const delay = 200 * time.Millisecond
	p := StartForTest(t, "127.0.0.1:0", l.Addr().String(), delay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, line := range []string{"one", "two", "three"} {
		begin := time.Now()
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != line+"\n" {
			t.Errorf("answer %q, want %q", got, line)
		}
		if d := time.Since(begin); d < delay || d > delay+time.Second {
			t.Errorf("%s answered after %v, want about %v", line, d, delay)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("a connection survived Close")
	}
}
