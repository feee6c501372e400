//go:build e2e

package bgp_test

// The real-router harness: a netlab lab (nodes and a router on one LAN), bird2 in the router
// namespace, one e2e/tools/bgpspeaker process per node namespace, and an "outside" client
// namespace behind the router.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

// Lab constants. VIPs come from the load-balancer ranges the lab never routes by itself
// (198.18.128.0/17 and fd00:c613:ff00::/40, see netlab's doc.go); the namespaces are the lab's
// own, so labs in other slots may use the same VIPs.
const (
	routerASN = 64512
	nodeASN   = 64513
	echoPort  = 8080
)

var (
	vip4 = netip.MustParsePrefix("198.18.200.10/32")
	vip6 = netip.MustParsePrefix("fd00:c613:ff80::10/128")
)

var speakerBin string // built (or found in the cache) by TestMain

func TestMain(m *testing.M) {
	var err error
	if speakerBin, err = gobuild.Binary(context.Background(), "e2e/tools/bgpspeaker"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// requireRouterLab fails (never skips) when the lab's prerequisites are missing.
func requireRouterLab(t testing.TB) {
	t.Helper()
	if err := netlab.Supported(); err != nil {
		t.Fatalf("the BGP tests need a network lab: %v (run them as root)", err)
	}
	for _, bin := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the BGP tests need a real router: %s not found; install it with `apt-get install -y bird2` (or `make prereqs`)", bin)
		}
	}
}

// routerLab is a running lab with bird on the router.
type routerLab struct {
	t       testing.TB
	lab     *netlab.Lab
	router  *netlab.Host
	nodes   []*netlab.Node
	outside *netlab.Host // the client behind the router
	birdDir string
	bird    *router.Bird
}

// newRouterLab builds a lab with n nodes, IPv6, and the outside client; every node has the
// VIPs as local addresses and an echo server on echoPort.
func newRouterLab(t testing.TB, n int) *routerLab {
	t.Helper()
	requireRouterLab(t)
	lab := netlab.New(t, netlab.Options{Nodes: n, Router: true, IPv6: true})
	rl := &routerLab{t: t, lab: lab, router: lab.Router(), nodes: lab.Nodes(), birdDir: t.TempDir()}
	outside, err := router.AddOutside(context.Background(), lab, rl.router,
		netip.MustParsePrefix("198.18.128.0/17"), netip.MustParsePrefix("fd00:c613:ff00::/40"))
	if err != nil {
		t.Fatal(err)
	}
	rl.outside = &outside.Host
	for _, node := range rl.nodes {
		// The VIP as a local address: the echo server answers for it (the real dataplane
		// DNATs it instead). lo rather than a dummy link: not every kernel has dummy.
		rl.exec(&node.Host, "ip", "addr", "add", vip4.String(), "dev", "lo")
		rl.exec(&node.Host, "ip", "addr", "add", vip6.String(), "dev", "lo", "nodad")
		node.StartEchoServer(t, "tcp", echoPort)
	}
	if err := outside.RouteBack(context.Background(), hosts(rl.nodes)...); err != nil {
		t.Fatal(err)
	}
	return rl
}

func hostAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a
}

func (rl *routerLab) exec(h *netlab.Host, name string, args ...string) {
	rl.t.Helper()
	if _, err := h.Exec(context.Background(), name, args...); err != nil {
		rl.t.Fatal(err)
	}
}

// holdTime is the hold time both sides use: without BFD a cut link is noticed after 6-9 s.
const holdTime = 9 * time.Second

// birdConfig is bird's configuration for neighbors: eBGP sessions from routerASN to nodeASN.
// PORTICO_BIRD_DEBUG=1 has bird log its protocols' debug messages.
func (rl *routerLab) birdConfig(neighbors []router.Neighbor) router.Config {
	for i := range neighbors {
		neighbors[i].ASN = nodeASN
	}
	// HashPorts: the router spreads flows over the ECMP next hops by port too, so that one
	// client's connections reach several nodes.
	return router.Config{ASN: routerASN, HoldTime: holdTime, Neighbors: neighbors, HashPorts: true, Debug: os.Getenv("PORTICO_BIRD_DEBUG") != ""}
}

// startBird runs bird in the router namespace with sessions to neighbors.
func (rl *routerLab) startBird(neighbors []router.Neighbor) {
	rl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := router.Start(ctx, rl.router, rl.birdDir, rl.birdConfig(neighbors))
	if err != nil {
		rl.t.Fatal(err)
	}
	rl.bird = b
}

// reconfigureBird has the running bird load the config for neighbors (bird restarts the
// sessions whose configuration changed).
func (rl *routerLab) reconfigureBird(neighbors []router.Neighbor) {
	rl.t.Helper()
	if err := rl.bird.Reconfigure(context.Background(), rl.birdConfig(neighbors)); err != nil {
		rl.t.Fatal(err)
	}
}

// birdc runs a birdc command against the lab's bird.
func (rl *routerLab) birdc(args ...string) (string, error) {
	return rl.bird.Birdc(context.Background(), args...)
}

// waitNextHops waits until bird's next hops for prefix are exactly want (in any order).
func (rl *routerLab) waitNextHops(prefix netip.Prefix, want []netip.Addr, timeout time.Duration) {
	rl.t.Helper()
	defer rl.dumpOnFailure()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := rl.bird.WaitNextHops(ctx, prefix, want); err != nil {
		rl.t.Fatalf("waiting %s for next hops %v for %s at the router: %v", timeout, want, prefix, err)
	}
}

// dumpOnFailure logs bird's protocols and routes if the test has failed.
func (rl *routerLab) dumpOnFailure() {
	if !rl.t.Failed() {
		return
	}
	for _, cmd := range [][]string{{"show", "protocols", "all"}, {"show", "route", "all"}} {
		out, _ := rl.birdc(cmd...)
		rl.t.Logf("birdc %s:\n%s", strings.Join(cmd, " "), out)
	}
}

// protoState returns bird's state line for a protocol ("Established", "Active", ...) and its
// full `show protocols all` output.
func (rl *routerLab) protoState(name string) (string, string, error) {
	out, err := rl.birdc("show", "protocols", "all", name)
	if err != nil {
		return "", out, err
	}
	state, err := router.ParseProtocolState(name, out)
	return state, out, err
}

func hosts(nodes []*netlab.Node) []*netlab.Host {
	hs := make([]*netlab.Host, len(nodes))
	for i, n := range nodes {
		hs[i] = &n.Host
	}
	return hs
}

// setLink sets a node's switch port up or down: the node's cable, cut or plugged back.
func (rl *routerLab) setLink(node *netlab.Node, up bool) {
	rl.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	rl.exec(rl.lab.Switch(), "ip", "link", "set", node.Name, state)
}

// speaker is a bgpspeaker process in a node namespace.
type speaker struct {
	t    testing.TB
	node *netlab.Node
	proc *netlab.Process
	http *http.Client
}

func (rl *routerLab) startSpeaker(node *netlab.Node) *speaker {
	rl.t.Helper()
	sock := filepath.Join(rl.birdDir, node.Name+".ctl")
	p := node.Run(rl.t, speakerBin, "-socket", sock, "-router-id", node.Addr.String())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.WaitFor(ctx, "ready"); err != nil {
		rl.t.Fatal(err)
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	return &speaker{t: rl.t, node: node, proc: p, http: client}
}

func (s *speaker) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://speaker"+path, body)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, s.node.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s on %s: %s: %s", method, path, s.node.Name, resp.Status, bytes.TrimSpace(b))
	}
	if out == nil {
		return nil
	}
	if sp, ok := out.(*string); ok {
		*sp = string(b)
		return nil
	}
	return json.Unmarshal(b, out)
}

func (s *speaker) setPeers(peers ...bgp.Peer) {
	s.t.Helper()
	if err := s.do(http.MethodPut, "/peers", peers, nil); err != nil {
		s.t.Fatal(err)
	}
}

func (s *speaker) advertise(advs ...bgp.Advertisement) {
	s.t.Helper()
	if advs == nil {
		advs = []bgp.Advertisement{}
	}
	if err := s.do(http.MethodPut, "/advertisements", advs, nil); err != nil {
		s.t.Fatal(err)
	}
}

func (s *speaker) status() bgp.Status {
	s.t.Helper()
	var st bgp.Status
	if err := s.do(http.MethodGet, "/status", nil, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func (s *speaker) metrics() string {
	s.t.Helper()
	var m string
	if err := s.do(http.MethodGet, "/metrics", nil, &m); err != nil {
		s.t.Fatal(err)
	}
	return m
}

// stop sends SIGTERM (graceful stop) and waits for the process to exit.
func (s *speaker) stop() {
	s.t.Helper()
	if err := syscall.Kill(s.proc.Pid(), syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	if err := s.proc.Wait(); err != nil {
		s.t.Fatalf("speaker on %s: %v\n%s", s.node.Name, err, s.proc.Output())
	}
}

// waitEstablished waits until every peer of the speaker is Established (and BFD Up where on).
func (s *speaker) waitEstablished(timeout time.Duration) {
	s.t.Helper()
	waitFor(s.t, timeout, "sessions of "+s.node.Name+" established", func() error {
		var st bgp.Status
		if err := s.do(http.MethodGet, "/status", nil, &st); err != nil {
			return err
		}
		for _, p := range st.Peers {
			if p.State != bgp.SessionEstablished || (p.BFD != bgp.BFDDisabled && p.BFD != bgp.BFDUp) {
				return fmt.Errorf("peer %s: %s, BFD %s", p.Address, p.State, p.BFD)
			}
		}
		return nil
	})
}

// peers4and6 are a node's sessions to the router, over IPv4 and IPv6.
func (rl *routerLab) peers4and6(password string, bfd bool) []bgp.Peer {
	base := bgp.Peer{ASN: routerASN, MyASN: nodeASN, HoldTime: holdTime, ConnectRetry: time.Second, Password: password}
	if bfd {
		base.BFD = &bgp.BFD{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 100 * time.Millisecond, Multiplier: 3}
	}
	p4, p6 := base, base
	p4.Address, p6.Address = rl.router.Addr, rl.router.Addr6
	return []bgp.Peer{p4, p6}
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := wait.Poll(context.Background(), 50*time.Millisecond, timeout, what, func(context.Context) error { return cond() }); err != nil {
		t.Fatal(err)
	}
}

// envInt reads a positive integer from the environment, or def when unset.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
