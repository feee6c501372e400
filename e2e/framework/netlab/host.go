package netlab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Host is one network namespace of the lab: a node, a pod, a client or the router.
type Host struct {
	// Name is the lab-local name: "node1", "client2", "router", "switch", or a pod's name.
	Name string
	// NS is the namespace name, usable with `ip netns exec` and `ip -n`.
	NS string
	// Addr is the IPv4 address on eth0: a LAN address, or the pod IP for pods. The switch has
	// none.
	Addr netip.Addr
	// Addr6 is the IPv6 counterpart of Addr when the lab has IPv6, else the zero Addr.
	Addr6 netip.Addr

	lab *Lab
}

// Node is a node namespace: a LAN host with forwarding on, whose pods hang off it.
type Node struct {
	Host
	// PodCIDR and PodCIDR6 hold the addresses of this node's pods; every other LAN host routes
	// them via the node's LAN address.
	PodCIDR  netip.Prefix
	PodCIDR6 netip.Prefix

	index int    // 1-based
	pods  []*Pod // guarded by lab.mu
}

// Pod is a pod namespace joined to its node by a veth, addressed like a Calico pod.
type Pod struct {
	Host
	// Node is the node the pod runs on.
	Node *Node
	// HostVeth is the node's end of the pod veth (in the node namespace); the pod's end is eth0.
	HostVeth string
}

// Exec runs name with args to completion inside h's namespace and returns its combined output.
// A failure's error includes the output.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := nsCommand(ctx, h.NS, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), h.NS, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Do runs fn on an OS thread inside h's namespace, for in-process socket or netlink work.
// Sockets created in fn stay in the namespace after fn returns; fn must not hand work that
// needs the namespace to other goroutines or start processes.
func (h *Host) Do(fn func() error) error { return inNamespace(h.NS, fn) }

// DialTCP connects from inside h's namespace to addr.
func (h *Host) DialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return h.dial(ctx, "tcp", addr)
}

// DialUDP returns a UDP socket in h's namespace connected to addr.
func (h *Host) DialUDP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return h.dial(ctx, "udp", addr)
}

func (h *Host) dial(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s %s from %s: %w", network, addr, h.Name, err)
	}
	return c, nil
}

// Listen opens a listener inside h's namespace ("tcp" or "udp" network, as net.Listen and
// net.ListenPacket take them). Use it for an in-process server in a node or the router.
func (h *Host) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() error {
		var lc net.ListenConfig
		var err error
		l, err = lc.Listen(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in %s: %w", network, address, h.Name, err)
	}
	return l, nil
}

// Reply is what the echo server answers.
type Reply struct {
	// Server is the echo server's -name: the pod (or host) name.
	Server string
	// Client is the client address and port as the server saw them.
	Client netip.AddrPort
}

// ParseReply parses an echo server line "NAME ADDR:PORT".
func ParseReply(line string) (Reply, error) {
	name, addr, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return Reply{}, fmt.Errorf("malformed echo reply %q", line)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return Reply{}, fmt.Errorf("malformed echo reply %q: %w", line, err)
	}
	return Reply{Server: name, Client: ap}, nil
}

// defaultRequestTimeout bounds Request when ctx has no deadline.
const defaultRequestTimeout = 5 * time.Second

// Request sends one request from inside h's namespace to an echo server at addr and returns its
// reply. network is "tcp" (connect, read the greeting line) or "udp" (send a datagram, resent
// every 500ms until a reply comes).
func (h *Host) Request(ctx context.Context, network string, addr netip.AddrPort) (Reply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	var line string
	var err error
	switch network {
	case "tcp":
		line, err = h.requestTCP(ctx, addr)
	case "udp":
		line, err = h.requestUDP(ctx, addr)
	default:
		return Reply{}, fmt.Errorf("unsupported network %q", network)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("requesting %s %s from %s: %w", network, addr, h.Name, err)
	}
	return ParseReply(line)
}

func (h *Host) requestTCP(ctx context.Context, addr netip.AddrPort) (string, error) {
	c, err := h.DialTCP(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func (h *Host) requestUDP(ctx context.Context, addr netip.AddrPort) (string, error) {
	c, err := h.DialUDP(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	buf := make([]byte, 1024)
	for {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		next := time.Now().Add(500 * time.Millisecond)
		if deadline.Before(next) {
			next = deadline
		}
		if err := c.SetReadDeadline(next); err != nil {
			return "", err
		}
		n, err := c.Read(buf)
		if err == nil {
			return string(buf[:n]), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !time.Now().Before(deadline) {
			return "", err
		}
	}
}
