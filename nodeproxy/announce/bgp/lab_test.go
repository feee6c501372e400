package bgp_test

// The real-router harness: a netlab lab (nodes and a router on one LAN), bird2 in the router
// namespace, one e2e/tools/bgpspeaker process per node namespace, and an "outside" client
// namespace behind the router.

import (
	"bufio"
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
	"text/template"
	"time"

	"github.com/portico-lb/portico/e2e/netlab"
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

var speakerBin string // built by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "portico-bgpspeaker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	speakerBin = filepath.Join(dir, "bgpspeaker")
	out, err := exec.Command("go", "build", "-o", speakerBin, "github.com/portico-lb/portico/e2e/tools/bgpspeaker").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building bgpspeaker: %v: %s\n", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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

// neighbor is one BGP session as the router (bird) sees it.
type neighbor struct {
	Name     string // bird protocol name
	Addr     netip.Addr
	Local    netip.Addr // the router's address for this session; zero: any
	Password string
	BFD      bool
}

func (n neighbor) IPv6() bool { return n.Addr.Is6() }

// routerLab is a running lab with bird on the router.
type routerLab struct {
	t       testing.TB
	lab     *netlab.Lab
	router  *netlab.Host
	nodes   []*netlab.Node
	outside *netlab.Host // the client behind the router
	birdDir string
	sock    string
}

// newRouterLab builds a lab with n nodes, IPv6, and the outside client; every node has the
// VIPs as local addresses and an echo server on echoPort.
func newRouterLab(t testing.TB, n int) *routerLab {
	t.Helper()
	requireRouterLab(t)
	lab := netlab.New(t, netlab.Options{Nodes: n, Router: true, IPv6: true})
	rl := &routerLab{t: t, lab: lab, router: lab.Router(), nodes: lab.Nodes(), birdDir: t.TempDir()}
	rl.sock = filepath.Join(rl.birdDir, "bird.ctl")
	rl.addOutside()
	// Spread flows over the ECMP next hops by port too, so one client's connections reach
	// several nodes.
	rl.exec(rl.router, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1")
	for _, node := range rl.nodes {
		// The VIP as a local address: the echo server answers for it (the real dataplane
		// DNATs it instead). lo rather than a dummy link: not every kernel has dummy.
		rl.exec(&node.Host, "ip", "addr", "add", vip4.String(), "dev", "lo")
		rl.exec(&node.Host, "ip", "addr", "add", vip6.String(), "dev", "lo", "nodad")
		rl.exec(&node.Host, "ip", "route", "add", rl.outside4().String(), "via", rl.router.Addr.String())
		rl.exec(&node.Host, "ip", "-6", "route", "add", rl.outside6().String(), "via", rl.router.Addr6.String())
		node.StartEchoServer(t, "tcp", echoPort)
	}
	return rl
}

// outside4 and outside6 are the subnet behind the router: the lab slot's spare .13 /24 and
// its IPv6 counterpart (see netlab's address plan).
func (rl *routerLab) outside4() netip.Prefix {
	a := rl.lab.LANPrefix().Addr().As4()
	a[2] += 13
	return netip.PrefixFrom(netip.AddrFrom4(a), 24)
}

func (rl *routerLab) outside6() netip.Prefix {
	a := rl.lab.LANPrefix6().Addr().As16()
	a[7] = 13
	return netip.PrefixFrom(netip.AddrFrom16(a), 64)
}

func hostAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// addOutside creates the namespace "<lab id>-outside" (the lab removes it with its others)
// joined to the router by a veth: router out0 .1, client eth0 .2, VIP ranges routed via the
// router.
func (rl *routerLab) addOutside() {
	ns := rl.lab.ID() + "-outside"
	ctx := context.Background()
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		rl.t.Fatalf("adding namespace %s: %v: %s", ns, err, out)
	}
	rl.outside = &netlab.Host{Name: "outside", NS: ns, Addr: hostAddr(rl.outside4(), 2), Addr6: hostAddr(rl.outside6(), 2)}
	rl.exec(rl.router, "ip", "link", "add", "out0", "type", "veth", "peer", "name", "eth0", "netns", ns)
	rl.exec(rl.router, "ip", "addr", "add", netip.PrefixFrom(hostAddr(rl.outside4(), 1), 24).String(), "dev", "out0")
	rl.exec(rl.router, "ip", "addr", "add", netip.PrefixFrom(hostAddr(rl.outside6(), 1), 64).String(), "dev", "out0", "nodad")
	rl.exec(rl.router, "ip", "link", "set", "out0", "up")
	rl.exec(rl.outside, "ip", "link", "set", "lo", "up")
	rl.exec(rl.outside, "ip", "addr", "add", netip.PrefixFrom(rl.outside.Addr, 24).String(), "dev", "eth0")
	rl.exec(rl.outside, "ip", "addr", "add", netip.PrefixFrom(rl.outside.Addr6, 64).String(), "dev", "eth0", "nodad")
	rl.exec(rl.outside, "ip", "link", "set", "eth0", "up")
	rl.exec(rl.outside, "ip", "route", "add", "198.18.128.0/17", "via", hostAddr(rl.outside4(), 1).String())
	rl.exec(rl.outside, "ip", "-6", "route", "add", "fd00:c613:ff00::/40", "via", hostAddr(rl.outside6(), 1).String())
}

func (rl *routerLab) exec(h *netlab.Host, name string, args ...string) {
	rl.t.Helper()
	if _, err := h.Exec(context.Background(), name, args...); err != nil {
		rl.t.Fatal(err)
	}
}

// birdConfig is bird2's configuration: kernel protocols that install merged (ECMP) routes,
// BFD at 100 ms x 3 on the LAN, and one eBGP session per neighbour that imports everything and
// exports nothing. Timers are short so sessions come back quickly between trials.
var birdConfig = template.Must(template.New("bird").Parse(`
log stderr all;
{{if .Debug}}debug protocols all;{{end}}
router id {{.RouterID}};
protocol device { scan time 10; }
protocol kernel kernel4 { ipv4 { export all; }; merge paths on; }
protocol kernel kernel6 { ipv6 { export all; }; merge paths on; }
protocol bfd {
	interface "eth0" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; };
}
template bgp nodes {
	local as {{.RouterASN}};
	hold time {{.HoldTime}};
	keepalive time {{.Keepalive}};
	connect retry time 1;
	error wait time 1, 2;
}
{{range .Neighbors}}
protocol bgp {{.Name}} from nodes {
	neighbor {{.Addr}} as {{$.NodeASN}};
	{{- if .Local.IsValid}}
	local {{.Local}} as {{$.RouterASN}};
	{{- end}}
	{{- if .Password}}
	password "{{.Password}}";
	{{- end}}
	bfd {{if .BFD}}on{{else}}off{{end}};
	{{if .IPv6}}ipv6{{else}}ipv4{{end}} { import all; export none; };
}
{{end}}
`))

// holdTime is the hold time both sides use: without BFD a cut link is noticed after 6-9 s.
const holdTime = 9 * time.Second

// startBird writes the config for neighbors and runs bird in the router namespace.
func (rl *routerLab) startBird(neighbors []neighbor) {
	rl.t.Helper()
	path := rl.writeBirdConfig(neighbors)
	rl.router.Run(rl.t, "bird", "-f", "-c", path, "-s", rl.sock)
	waitFor(rl.t, 10*time.Second, "bird to answer", func() error {
		_, err := rl.birdc("show", "status")
		return err
	})
}

// reconfigureBird rewrites the config for neighbors and has the running bird load it (bird
// restarts the sessions whose configuration changed).
func (rl *routerLab) reconfigureBird(neighbors []neighbor) {
	rl.t.Helper()
	rl.writeBirdConfig(neighbors)
	if out, err := rl.birdc("configure"); err != nil || !strings.Contains(out, "Reconfigur") {
		rl.t.Fatalf("birdc configure: %v:\n%s", err, out)
	}
}

// writeBirdConfig renders the config for neighbors and returns its path.
func (rl *routerLab) writeBirdConfig(neighbors []neighbor) string {
	rl.t.Helper()
	var conf bytes.Buffer
	err := birdConfig.Execute(&conf, map[string]any{
		"RouterID": rl.router.Addr, "RouterASN": routerASN, "NodeASN": nodeASN,
		"HoldTime": int(holdTime / time.Second), "Keepalive": int(holdTime / time.Second / 3),
		"Neighbors": neighbors, "Debug": os.Getenv("PORTICO_BIRD_DEBUG") != "",
	})
	if err != nil {
		rl.t.Fatal(err)
	}
	path := filepath.Join(rl.birdDir, "bird.conf")
	if err := os.WriteFile(path, conf.Bytes(), 0o644); err != nil {
		rl.t.Fatal(err)
	}
	return path
}

// birdc runs a birdc command against the lab's bird.
func (rl *routerLab) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", rl.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// birdRoute is one BGP route bird holds for a prefix.
type birdRoute struct {
	Proto   string            // the bird protocol (neighbour) it came from
	NextHop netip.Addr        // from its "via" line
	Attrs   map[string]string // "BGP.community" -> "(65000,100)"
}

// routes reads bird's routes for prefix (`show route <prefix> all`); none when absent.
func (rl *routerLab) routes(prefix netip.Prefix) ([]birdRoute, error) {
	out, err := rl.birdc("show", "route", prefix.String(), "all")
	if strings.Contains(out, "Network not found") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseBirdRoutes(out, prefix)
}

// parseBirdRoutes parses `birdc show route <prefix> all`: a route starts with a line holding
// "[proto ...]" (the first also carries the prefix), then an indented "via ADDR on IF" line and
// attribute lines "Name: value".
func parseBirdRoutes(out string, prefix netip.Prefix) ([]birdRoute, error) {
	var routes []birdRoute
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.Contains(line, "Network not found"):
			return nil, nil
		case strings.Contains(line, " unicast [") || strings.HasPrefix(trimmed, "unicast ["):
			_, rest, _ := strings.Cut(line, "[")
			proto, _, _ := strings.Cut(rest, " ")
			routes = append(routes, birdRoute{Proto: proto, Attrs: map[string]string{}})
		case len(routes) > 0 && strings.HasPrefix(trimmed, "via "):
			f := strings.Fields(trimmed)
			a, err := netip.ParseAddr(f[1])
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", line, err)
			}
			routes[len(routes)-1].NextHop = a
		case len(routes) > 0 && strings.Contains(trimmed, ": "):
			k, v, _ := strings.Cut(trimmed, ": ")
			routes[len(routes)-1].Attrs[k] = v
		}
	}
	return routes, nil
}

// nextHops returns the next hops of bird's routes for prefix.
func (rl *routerLab) nextHops(prefix netip.Prefix) ([]netip.Addr, error) {
	routes, err := rl.routes(prefix)
	if err != nil {
		return nil, err
	}
	hops := make([]netip.Addr, len(routes))
	for i, r := range routes {
		hops[i] = r.NextHop
	}
	return hops, nil
}

// waitNextHops waits until bird's next hops for prefix are exactly want (in any order).
func (rl *routerLab) waitNextHops(prefix netip.Prefix, want []netip.Addr, timeout time.Duration) {
	rl.t.Helper()
	defer rl.dumpOnFailure()
	waitFor(rl.t, timeout, fmt.Sprintf("next hops %v for %s at the router", want, prefix), func() error {
		got, err := rl.nextHops(prefix)
		if err != nil {
			return err
		}
		if !sameAddrs(got, want) {
			return fmt.Errorf("next hops %v", got)
		}
		return nil
	})
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

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[netip.Addr]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// protoState returns bird's state line for a protocol ("Established", "Active", ...) and its
// full `show protocols all` output.
func (rl *routerLab) protoState(name string) (string, string, error) {
	out, err := rl.birdc("show", "protocols", "all", name)
	if err != nil {
		return "", out, err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "BGP state" {
			return strings.TrimSpace(v), out, nil
		}
	}
	return "", out, fmt.Errorf("no BGP state for %s in:\n%s", name, out)
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
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
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
