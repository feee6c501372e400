// Command echoserver is the backend that network-lab tests run inside pod (or node) namespaces.
// Every reply names the server and the client address it saw, so a test can assert which backend
// answered and whether the client's source address survived the load balancer.
//
// TCP: on accept it writes one line "NAME CLIENTADDR:PORT\n", then echoes everything the client
// sends until EOF, so a test can hold a connection open. UDP: it answers every datagram with the
// same one line. It prints "ready" on stdout once every listener is bound.
//
// With -dial ADDR:PORT it is a client instead: it connects over TCP, prints the server's
// greeting line and exits (status 1 if that fails), e.g. run by exec inside a pod.
//
// Listeners bind the wildcard address (dual stack). A UDP reply leaves with the source address
// the kernel's routing picks, which is the address the datagram was sent to as long as the
// namespace has a single address (true for pods).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "", "server name written in every reply (default: the hostname)")
	tcp := flag.String("tcp", "", "comma-separated TCP ports to listen on")
	udp := flag.String("udp", "", "comma-separated UDP ports to listen on")
	dial := flag.String("dial", "", "be a client: connect to this TCP address, print the greeting, exit")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("echoserver: ")
	if *dial != "" {
		if err := dialOnce(*dial); err != nil {
			log.Fatal(err)
		}
		return
	}

	if *name == "" {
		h, err := os.Hostname()
		if err != nil {
			log.Fatalf("reading hostname: %v", err)
		}
		*name = h
	}
	tcpPorts, err := parsePorts(*tcp)
	if err != nil {
		log.Fatalf("-tcp: %v", err)
	}
	udpPorts, err := parsePorts(*udp)
	if err != nil {
		log.Fatalf("-udp: %v", err)
	}
	if len(tcpPorts)+len(udpPorts) == 0 {
		log.Fatal("no ports: pass -tcp and/or -udp")
	}
	if err := run(*name, tcpPorts, udpPorts); err != nil {
		log.Fatal(err)
	}
}

// run binds every listener first, reports readiness, then serves until one listener fails.
func run(name string, tcpPorts, udpPorts []int) error {
	var listeners []net.Listener
	for _, p := range tcpPorts {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			return fmt.Errorf("listening on tcp port %d: %w", p, err)
		}
		listeners = append(listeners, l)
	}
	var conns []*net.UDPConn
	for _, p := range udpPorts {
		c, err := net.ListenUDP("udp", &net.UDPAddr{Port: p})
		if err != nil {
			return fmt.Errorf("listening on udp port %d: %w", p, err)
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")

	errc := make(chan error, len(listeners)+len(conns))
	for _, l := range listeners {
		go func() { errc <- serveTCP(name, l) }()
	}
	for _, c := range conns {
		go func() { errc <- serveUDP(name, c) }()
	}
	return <-errc
}

// dialOnce connects to addr and copies the greeting line to stdout.
func dialOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the greeting of %s: %w", addr, err)
	}
	_, err = io.WriteString(os.Stdout, line)
	return err
}

func serveTCP(name string, l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting on %s: %w", l.Addr(), err)
		}
		go handleTCP(name, c)
	}
}

func handleTCP(name string, c net.Conn) {
	defer c.Close()
	remote := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	if _, err := io.WriteString(c, greeting(name, remote)); err != nil {
		return
	}
	// Echo until the client closes its side; errors just end the connection.
	_, _ = io.Copy(c, c)
}

func serveUDP(name string, c *net.UDPConn) error {
	buf := make([]byte, 64<<10)
	for {
		_, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return fmt.Errorf("reading on %s: %w", c.LocalAddr(), err)
		}
		// Reply to the address exactly as received (v4-mapped on a dual-stack socket).
		if _, err := c.WriteToUDPAddrPort([]byte(greeting(name, from)), from); err != nil {
			log.Printf("replying to %s: %v", from, err)
		}
	}
}

// greeting is the reply line: the server name and the client address, IPv4 clients of a
// dual-stack socket shown as plain IPv4.
func greeting(name string, remote netip.AddrPort) string {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	return name + " " + remote.String() + "\n"
}

func parsePorts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ports []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("invalid port %q", f)
		}
		ports = append(ports, p)
	}
	return ports, nil
}
