package router

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// Config is bird's configuration.
type Config struct {
	// ASN is the router's AS number.
	ASN uint32
	// RouterID defaults to the host's IPv4 address.
	RouterID netip.Addr
	// HoldTime and Keepalive apply to every session; defaults 9 s and 3 s (bird: whole seconds).
	HoldTime, Keepalive time.Duration
	// BFD is the BFD session setting on Interface, for the neighbours with BFD on; default
	// 100 ms x 3.
	BFD BFD
	// Interface is where the neighbours are; default "eth0", the LAN of every netlab host.
	Interface string
	// Neighbors are the sessions, one per address (an IPv4 neighbour carries IPv4 routes, an
	// IPv6 one IPv6 routes).
	Neighbors []Neighbor
	// Debug has bird log every protocol's debug messages.
	Debug bool
	// HashPorts has the router's kernel spread flows over ECMP next hops by their ports too
	// (fib_multipath_hash_policy=1, IPv4 and IPv6), so that one client's connections reach
	// every announcing node; by default the kernel hashes addresses only.
	HashPorts bool
}

// BFD is bird's BFD interval (receive and transmit) and detection multiplier.
type BFD struct {
	Interval   time.Duration
	Multiplier int
}

// Neighbor is one BGP session: bird imports everything from it and exports nothing.
type Neighbor struct {
	// Name is bird's protocol name (letters, digits, underscores).
	Name string
	Addr netip.Addr
	ASN  uint32
	// Local is the router's address for the session; zero: any.
	Local netip.Addr
	// Password is the TCP MD5 password; empty: none.
	Password string
	// BFD turns BFD on for the session: bird ends the session when BFD says the path is down.
	BFD bool
	// BFDGraceful (with BFD) has bird treat BFD going down as the neighbour's graceful restart
	// (bird's "bfd graceful"): it keeps the neighbour's routes, stale, for its restart time
	// instead of dropping them.
	BFDGraceful bool
}

// IPv6 reports whether the session carries IPv6 routes.
func (n Neighbor) IPv6() bool { return n.Addr.Is6() }

func (c Config) withDefaults(h *netlab.Host) Config {
	if !c.RouterID.IsValid() {
		c.RouterID = h.Addr
	}
	if c.HoldTime == 0 {
		c.HoldTime = 9 * time.Second
	}
	if c.Keepalive == 0 {
		c.Keepalive = c.HoldTime / 3
	}
	if c.BFD.Interval == 0 {
		c.BFD.Interval = 100 * time.Millisecond
	}
	if c.BFD.Multiplier == 0 {
		c.BFD.Multiplier = 3
	}
	if c.Interface == "" {
		c.Interface = "eth0"
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ASN == 0 {
		errs = append(errs, errors.New("the router's ASN is missing"))
	}
	if c.HoldTime%time.Second != 0 || c.Keepalive%time.Second != 0 || c.HoldTime < 3*time.Second || c.Keepalive < time.Second {
		errs = append(errs, fmt.Errorf("hold time %s / keepalive %s: want whole seconds, hold at least 3 s", c.HoldTime, c.Keepalive))
	}
	if c.BFD.Interval%time.Millisecond != 0 || c.BFD.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("BFD %s x %d: want whole milliseconds and a positive multiplier", c.BFD.Interval, c.BFD.Multiplier))
	}
	seen := map[string]bool{}
	for _, n := range c.Neighbors {
		if seen[n.Name] || n.Name == "" || strings.ContainsFunc(n.Name, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) {
			errs = append(errs, fmt.Errorf("neighbor name %q: want a unique name of letters, digits and underscores", n.Name))
		}
		seen[n.Name] = true
		if !n.Addr.IsValid() || n.ASN == 0 || strings.ContainsAny(n.Password, `"\`) {
			errs = append(errs, fmt.Errorf("neighbor %s: want an address, an ASN and a password without quotes or backslashes", n.Name))
		}
	}
	return errors.Join(errs...)
}

// birdConfig renders a Config. The kernel protocols install routes with all their next hops
// (merge paths), so the router's kernel spreads flows over them (ECMP). Connect retry and
// error wait are short, so a session comes back within a second or two after a cut.
var birdConfig = template.Must(template.New("bird").Funcs(template.FuncMap{
	"s":  func(d time.Duration) int64 { return int64(d / time.Second) },
	"ms": func(d time.Duration) int64 { return int64(d / time.Millisecond) },
}).Parse(`log stderr all;
{{- if .Debug}}
debug protocols all;
{{- end}}
router id {{.RouterID}};
protocol device { scan time 10; }
protocol kernel kernel4 { ipv4 { export all; }; merge paths on; }
protocol kernel kernel6 { ipv6 { export all; }; merge paths on; }
protocol bfd {
	interface "{{.Interface}}" { min rx interval {{ms .BFD.Interval}} ms; min tx interval {{ms .BFD.Interval}} ms; multiplier {{.BFD.Multiplier}}; };
}
template bgp nodes {
	local as {{.ASN}};
	hold time {{s .HoldTime}};
	keepalive time {{s .Keepalive}};
	connect retry time 1;
	error wait time 1, 2;
}
{{range .Neighbors}}
protocol bgp {{.Name}} from nodes {
	neighbor {{.Addr}} as {{.ASN}};
	{{- if .Local.IsValid}}
	local {{.Local}} as {{$.ASN}};
	{{- end}}
	{{- if .Password}}
	password "{{.Password}}";
	{{- end}}
	bfd {{if and .BFD .BFDGraceful}}graceful{{else if .BFD}}on{{else}}off{{end}};
	{{if .IPv6}}ipv6{{else}}ipv4{{end}} { import all; export none; };
}
{{end}}`))

// Render returns bird's configuration file for c as Start would write it on h.
func Render(h *netlab.Host, c Config) ([]byte, error) {
	c = c.withDefaults(h)
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("invalid router config: %w", err)
	}
	var b bytes.Buffer
	if err := birdConfig.Execute(&b, c); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Bird is a bird2 daemon running as the router in a lab namespace.
type Bird struct {
	// Host is the router's namespace.
	Host *netlab.Host

	conf string // the config file
	sock string // the control socket

	mu   sync.Mutex
	cfg  Config
	proc *netlab.Process
}

// Start writes bird's configuration into dir (which must exist and outlive bird) and runs
// bird in h's namespace, as a lab process, and waits until birdc answers.
func Start(ctx context.Context, h *netlab.Host, dir string, c Config) (*Bird, error) {
	if _, err := exec.LookPath("bird"); err != nil {
		return nil, errors.New("bird not found: apt-get install -y bird2 (or make prereqs)")
	}
	if _, err := exec.LookPath("birdc"); err != nil {
		return nil, errors.New("birdc not found: apt-get install -y bird2 (or make prereqs)")
	}
	if c.HashPorts {
		if _, err := h.Exec(ctx, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"); err != nil {
			return nil, fmt.Errorf("hashing ECMP flows by port: %w", err)
		}
	}
	b := &Bird{Host: h, conf: filepath.Join(dir, "bird.conf"), sock: filepath.Join(dir, "bird.ctl")}
	if err := b.write(c); err != nil {
		return nil, err
	}
	if err := b.run(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// run starts bird with the written config and waits until birdc answers.
func (b *Bird) run(ctx context.Context) error {
	_ = os.Remove(b.sock)
	p, err := b.Host.Start("bird", "-f", "-c", b.conf, "-s", b.sock)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.proc = p
	b.mu.Unlock()
	for {
		_, err := b.Birdc(ctx, "show", "status")
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("bird exited: %v\n%s", p.Wait(), p.Output())
		case <-ctx.Done():
			_ = p.Stop()
			return fmt.Errorf("waiting for bird to answer: %w (%v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Restart kills bird and starts it again with c: every session and BFD session starts
// afresh, as after a router reboot.
func (b *Bird) Restart(ctx context.Context, c Config) error {
	if err := b.Stop(); err != nil {
		return err
	}
	if err := b.write(c); err != nil {
		return err
	}
	return b.run(ctx)
}

func (b *Bird) write(c Config) error {
	conf, err := Render(b.Host, c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.conf, conf, 0o644); err != nil {
		return fmt.Errorf("writing bird config: %w", err)
	}
	b.mu.Lock()
	b.cfg = c
	b.mu.Unlock()
	return nil
}

// Config is the configuration bird runs with.
func (b *Bird) Config() Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cfg
	c.Neighbors = slices.Clone(c.Neighbors)
	return c
}

// Reconfigure rewrites the configuration and tells bird to load it (`birdc configure`);
// sessions whose settings changed restart. Seen in e2e/suites/bgp (bird 2.0.12, portico-agent's
// GoBGP BFD): after BFD was turned back on for the IPv4 sessions this way, in 2 of 4 runs every
// agent session, IPv6 ones too, kept closing with "BFD is down" right after coming up for more
// than a minute; with Restart instead, the runs since recovered within seconds.
func (b *Bird) Reconfigure(ctx context.Context, c Config) error {
	if err := b.write(c); err != nil {
		return err
	}
	out, err := b.Birdc(ctx, "configure")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Reconfigured") && !strings.Contains(out, "Reconfiguration in progress") {
		return fmt.Errorf("birdc configure: %s", strings.TrimSpace(out))
	}
	return nil
}

// Stop kills bird; Lab.Close does too.
func (b *Bird) Stop() error { return b.process().Stop() }

// Output is what the running bird logged so far.
func (b *Bird) Output() string { return b.process().Output() }

func (b *Bird) process() *netlab.Process {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

// Birdc runs birdc with args against this bird and returns its output.
func (b *Bird) Birdc(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// ShowRoute is `birdc show route <prefix> all`: bird's routes for prefix with their attributes,
// as bird prints them; empty when bird has none.
func (b *Bird) ShowRoute(ctx context.Context, prefix netip.Prefix) (string, error) {
	out, err := b.Birdc(ctx, "show", "route", prefix.String(), "all")
	if strings.Contains(out, "Network not found") {
		return "", nil
	}
	return out, err
}

// Route is one route bird holds for a prefix.
type Route struct {
	// Proto is the bird protocol (neighbour) it came from.
	Proto string
	// NextHop is from its "via" line.
	NextHop netip.Addr
	// Attrs are its attribute lines: "BGP.community" -> "(65000,100)".
	Attrs map[string]string
}

// Routes reads bird's routes for prefix; none when it has none.
func (b *Bird) Routes(ctx context.Context, prefix netip.Prefix) ([]Route, error) {
	out, err := b.ShowRoute(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return ParseRoutes(out)
}

// NextHops returns the next hops of bird's routes for prefix, sorted.
func (b *Bird) NextHops(ctx context.Context, prefix netip.Prefix) ([]netip.Addr, error) {
	routes, err := b.Routes(ctx, prefix)
	if err != nil {
		return nil, err
	}
	hops := make([]netip.Addr, 0, len(routes))
	for _, r := range routes {
		hops = append(hops, r.NextHop)
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return hops, nil
}

// WaitNextHops polls every 20 ms until the next hops of prefix are exactly want (in any order)
// both in bird's table and in the router's kernel (KernelNextHops), and returns bird's `show
// route` of that moment. Bird copies its table into the kernel asynchronously: right after bird
// lists a next hop, packets may still find no route (the client then sees "network is
// unreachable"), so a caller that means "traffic now takes these paths" needs both. It gives
// up when ctx ends, with the last next hops seen.
func (b *Bird) WaitNextHops(ctx context.Context, prefix netip.Prefix, want []netip.Addr) (string, error) {
	want = slices.Clone(want)
	slices.SortFunc(want, netip.Addr.Compare)
	for {
		out, err := b.ShowRoute(ctx, prefix)
		var got []netip.Addr
		kernel := "not read while bird differs"
		if err == nil {
			var routes []Route
			if routes, err = ParseRoutes(out); err == nil {
				for _, r := range routes {
					got = append(got, r.NextHop)
				}
				slices.SortFunc(got, netip.Addr.Compare)
				if slices.Equal(got, want) {
					var hops []netip.Addr
					hops, err = KernelNextHops(b.Host, prefix)
					if err == nil && slices.Equal(hops, want) {
						return out, nil
					}
					kernel = fmt.Sprint(hops)
				}
			}
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("router's next hops for %s: bird %v, kernel %v (%v), want %v: %w", prefix, got, kernel, err, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ProtocolState is the "BGP state" bird reports for protocol name ("Established", "Active",
// ...).
func (b *Bird) ProtocolState(ctx context.Context, name string) (string, error) {
	out, err := b.Birdc(ctx, "show", "protocols", "all", name)
	if err != nil {
		return "", err
	}
	return ParseProtocolState(name, out)
}

// ParseProtocolState reads the "BGP state" of protocol name from `birdc show protocols all
// <name>`.
func ParseProtocolState(name, out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "BGP state" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no BGP state for %s in:\n%s", name, out)
}

// SameSince tells whether two readings of one protocol's "state since info" (the columns after
// the table of a `birdc show protocols` line, e.g. "up 02:32:06.150 Established") show the same
// session: the same state and info, entered at the same time within 50 ms. Bird prints a state's
// time in milliseconds converted from its monotonic clock at each call, so an untouched
// session's time can move by a millisecond between two readings; a reset session's time moves
// by the seconds the reset took.
func SameSince(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) < 2 || len(fb) < 2 || !slices.Equal(append([]string{fa[0]}, fa[2:]...), append([]string{fb[0]}, fb[2:]...)) {
		return false
	}
	ta, errA := time.Parse("15:04:05.000", fa[1])
	tb, errB := time.Parse("15:04:05.000", fb[1])
	if errA != nil || errB != nil {
		return fa[1] == fb[1]
	}
	d := ta.Sub(tb)
	return d <= 50*time.Millisecond && d >= -50*time.Millisecond
}

// ParseRoutes parses `birdc show route <prefix> all`: a route starts with a line holding
// "unicast [proto ..." (the first one also names the prefix), followed by an indented
// "via ADDR on IF" line and attribute lines "Name: value".
func ParseRoutes(out string) ([]Route, error) {
	var routes []Route
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.Contains(line, " unicast [") || strings.HasPrefix(trimmed, "unicast ["):
			_, rest, _ := strings.Cut(line, "[")
			proto, _, _ := strings.Cut(rest, " ")
			routes = append(routes, Route{Proto: proto, Attrs: map[string]string{}})
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
	return routes, sc.Err()
}

// BFDSessions reads bird's BFD sessions (`birdc show bfd sessions`): the state ("Up", "Down",
// "Init", "AdminDown") by neighbour address.
func (b *Bird) BFDSessions(ctx context.Context) (map[netip.Addr]string, error) {
	out, err := b.Birdc(ctx, "show", "bfd", "sessions")
	if err != nil {
		return nil, err
	}
	return ParseBFDSessions(out), nil
}

// ParseBFDSessions parses `birdc show bfd sessions`: after a header, one line per session,
// "ADDRESS INTERFACE STATE SINCE INTERVAL TIMEOUT".
func ParseBFDSessions(out string) map[netip.Addr]string {
	states := map[netip.Addr]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if a, err := netip.ParseAddr(f[0]); err == nil {
			states[a] = f[2]
		}
	}
	return states
}

// GracefulRestartActive reports whether `birdc show protocols all <name>` shows bird keeping a
// restarting neighbour's routes (graceful restart, RFC 4724): its "Neighbor graceful restart
// active" line, printed from the session's end until the new session's End-of-RIB or the
// restart time.
func GracefulRestartActive(out string) bool {
	return strings.Contains(out, "Neighbor graceful restart active")
}
