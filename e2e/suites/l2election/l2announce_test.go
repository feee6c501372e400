package l2election

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/nodeproxy/announce/election"
)

var trials = flag.Int("l2.trials", 10, "failover trials per failure mode")

const (
	echoPort     = 8081
	probeEvery   = 50 * time.Millisecond
	failoverMax  = 3 * time.Second        // a trial fails beyond this
	quietWindow  = 2 * time.Second        // probes counted after the new announcer served
	replyGrace   = 100 * time.Millisecond // a reply to a probe sent in a window counts until then after it
	membershipPt = 7946
)

var vip4 = netip.MustParseAddr("198.18.200.10")

func checkPrerequisites(t *testing.T) {
	t.Helper()
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.IPTables, prereq.IPUtilsArping)
	if err := netlab.Supported(); err != nil {
		t.Fatalf("%v (run the test as root with iproute2)", err)
	}
}

func l2nodeBinary(t *testing.T) string {
	t.Helper()
	return gobuild.BinaryForTest(t, "e2e/tools/l2node")
}

// pickVIP6 returns an IPv6 VIP whose candidate order equals vip4's, so that one failure moves
// both VIPs to the same node and one trial measures both families.
func pickVIP6(t *testing.T, nodes []*corev1.Node) netip.Addr {
	want := election.Candidates(election.Input{VIP: vip4, Nodes: nodes})
	for k := 1; k < 4096; k++ {
		v := netip.AddrFrom16([16]byte{0xfd, 0x00, 0xc6, 0x13, 0xff, 0x00, 14: byte(k >> 8), 15: byte(k)})
		if slices.Equal(election.Candidates(election.Input{VIP: v, Nodes: nodes}), want) {
			return v
		}
	}
	t.Fatal("no IPv6 VIP with the IPv4 VIP's order")
	return netip.Addr{}
}

type lab struct {
	t      *testing.T
	lab    *netlab.Lab
	nodes  []*netlab.Node
	client *netlab.Host
	names  []string
	objs   []*corev1.Node
	macs   map[string]net.HardwareAddr // node name -> eth0 MAC
	pods   map[string]string           // pod name -> node name
	vip6   netip.Addr
	bin    string
	procs  map[string]*netlab.Process
}

func newLab(t *testing.T) *lab {
	checkPrerequisites(t)
	l := &lab{t: t, lab: netlab.New(t, netlab.Options{Nodes: 3, Clients: 1, IPv6: true}),
		macs: map[string]net.HardwareAddr{}, pods: map[string]string{}, procs: map[string]*netlab.Process{}}
	l.nodes, l.client, l.bin = l.lab.Nodes(), l.lab.Clients()[0], l2nodeBinary(t)
	for _, n := range l.nodes {
		l.names = append(l.names, n.Name)
		l.objs = append(l.objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
	}
	l.vip6 = pickVIP6(t, l.objs)
	ctx := context.Background()
	for _, n := range l.nodes {
		err := n.Do(func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err == nil {
				l.macs[n.Name] = ifi.HardwareAddr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// The node does not own the VIPs: the agent's DNAT in PREROUTING takes them to a pod.
		pod := n.AddPod(t, "web-"+n.Name)
		pod.StartEchoServer(t, "udp", echoPort)
		l.pods[pod.Name] = n.Name
		for _, c := range [][]string{
			{"iptables", "-t", "nat", "-A", "PREROUTING", "-d", vip4.String(), "-p", "udp", "--dport", fmt.Sprint(echoPort),
				"-j", "DNAT", "--to-destination", netip.AddrPortFrom(pod.Addr, echoPort).String()},
			{"ip6tables", "-t", "nat", "-A", "PREROUTING", "-d", l.vip6.String(), "-p", "udp", "--dport", fmt.Sprint(echoPort),
				"-j", "DNAT", "--to-destination", netip.AddrPortFrom(pod.Addr6, echoPort).String()},
		} {
			if _, err := n.Exec(ctx, c[0], c[1:]...); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The client reaches the VIPs on-link: by ARP / NDP, as on a flat L2 segment.
	for _, c := range [][]string{
		{"ip", "route", "add", netip.PrefixFrom(vip4, 24).Masked().String(), "dev", "eth0"},
		{"ip", "-6", "route", "add", netip.PrefixFrom(l.vip6, 64).Masked().String(), "dev", "eth0"},
	} {
		if _, err := l.client.Exec(ctx, c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// start runs l2node on every node and waits until all see each other and only want announces.
func (l *lab) start(want string) {
	t := l.t
	for i, n := range l.nodes {
		var peers []string
		for j, o := range l.nodes {
			if j != i {
				peers = append(peers, o.Addr.String())
			}
		}
		p, err := n.Start(l.bin, "-node", n.Name, "-bind", n.Addr.String(), "-peers", strings.Join(peers, ","),
			"-nodes", strings.Join(l.names, ","), "-vips", vip4.String()+","+l.vip6.String())
		if err != nil {
			t.Fatal(err)
		}
		l.procs[n.Name] = p
	}
	deadline := time.Now().Add(10 * time.Second)
	for !l.settled(want) {
		if time.Now().After(deadline) {
			for n, p := range l.procs {
				t.Logf("%s output:\n%s", n, p.Output())
			}
			t.Fatalf("nodes did not settle on %s announcing", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled reports whether every process sees all nodes and exactly want announces both VIPs.
func (l *lab) settled(want string) bool {
	all := "view " + strings.Join(l.names, ",")
	for n, p := range l.procs {
		out := p.Output()
		if !strings.Contains(lastLine(out, "view "), all) {
			return false
		}
		for _, v := range []netip.Addr{vip4, l.vip6} {
			if announcing(out, v) != (n == want) {
				return false
			}
		}
	}
	return true
}

func lastLine(out, prefix string) string {
	var last string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			last = line
		}
	}
	return last
}

func announcing(out string, v netip.Addr) bool {
	return strings.Count(out, "announce "+v.String()+"\n") > strings.Count(out, "withdraw "+v.String()+"\n")
}

func (l *lab) stopAll() {
	for n, p := range l.procs {
		if err := p.Stop(); err != nil {
			l.t.Error(err)
		}
		delete(l.procs, n)
	}
}

// prober sends a UDP probe to a VIP every 50 ms from the client and records the replies.
type prober struct {
	conn    net.Conn
	mu      sync.Mutex
	sent    []time.Time
	replies []reply
	stop    chan struct{}
	done    sync.WaitGroup
}

type reply struct {
	at  time.Time
	pod string
}

func (l *lab) probe(v netip.Addr) *prober {
	c, err := l.client.DialUDP(context.Background(), netip.AddrPortFrom(v, echoPort))
	if err != nil {
		l.t.Fatal(err)
	}
	p := &prober{conn: c, stop: make(chan struct{})}
	p.done.Add(2)
	go func() {
		defer p.done.Done()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			name, _, _ := strings.Cut(line, " ")
			p.mu.Lock()
			p.replies = append(p.replies, reply{time.Now(), name})
			p.mu.Unlock()
		}
	}()
	go func() {
		defer p.done.Done()
		tk := time.NewTicker(probeEvery)
		defer tk.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tk.C:
				p.mu.Lock()
				p.sent = append(p.sent, time.Now())
				p.mu.Unlock()
				c.Write([]byte("probe\n")) // errors (no neighbour yet) count as lost probes
			}
		}
	}()
	return p
}

func (p *prober) close() {
	close(p.stop)
	p.conn.Close()
	p.done.Wait()
}

// firstFrom returns the first reply after since from pod.
func (p *prober) firstFrom(pod string, since time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.replies {
		if r.at.After(since) && r.pod == pod {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// lost counts probes sent in [from, to) that got no reply: sends minus replies in the window
// (a reply comes well within a millisecond on this LAN; replyGrace leaves room for a loaded
// machine).
func (p *prober) lost(from, to time.Time) (lost, sent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sent {
		if !s.Before(from) && s.Before(to) {
			sent++
		}
	}
	got := 0
	for _, r := range p.replies {
		if !r.at.Before(from) && r.at.Before(to.Add(replyGrace)) {
			got++
		}
	}
	return max(sent-got, 0), sent
}

func (l *lab) handle() *netlink.Handle {
	ns, err := netns.GetFromName(l.client.NS)
	if err != nil {
		l.t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(h.Close)
	return h
}

// waitNeighbour polls every 10 ms until the client's entry for v is mac; it returns when.
func (l *lab) waitNeighbour(h *netlink.Handle, v netip.Addr, mac net.HardwareAddr, within time.Duration) (time.Time, bool) {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if got := netlab.Neighbour(h, v); got.String() == mac.String() {
			return time.Now(), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, false
}

func podOf(node string) string { return "web-" + node }

type figures map[string][]time.Duration

func (f figures) add(key string, d time.Duration) { f[key] = append(f[key], d) }

func (f figures) report(t *testing.T) {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ds := slices.Clone(f[k])
		slices.Sort(ds)
		t.Logf("FIGURE %-34s n=%2d median %4d ms  worst %4d ms  all %v", k, len(ds),
			ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds(), ds)
	}
}

// TestFailover: the client resolves both VIPs to the winner's MAC and is served by the winner's
// pod; then the winner is killed (SIGKILL), stopped abruptly in process (membership and
// announcer shut down without leaving) or cut off the LAN, and the next node in the election's
// order must take over, the client's neighbour entries follow its gratuitous announcements, and
// no probe is lost once it serves. After a link cut the node comes back: the partition heals and
// the VIPs return to it.
func TestFailover(t *testing.T) {
	l := newLab(t)
	h := l.handle()
	order := election.Candidates(election.Input{VIP: vip4, Nodes: l.objs})
	winner, next := order[0], order[1]
	t.Logf("VIPs %s and %s: election order %v", vip4, l.vip6, order)
	byName := map[string]*netlab.Node{}
	for _, n := range l.nodes {
		byName[n.Name] = n
	}
	figs := figures{}
	t.Cleanup(func() { figs.report(t) })

	first := true
	for _, mode := range []string{"kill", "abrupt-stop", "link-cut"} {
		for trial := 1; trial <= *trials; trial++ {
			l.start(winner)
			probes := map[netip.Addr]*prober{vip4: l.probe(vip4), l.vip6: l.probe(l.vip6)}
			for v, p := range probes {
				if _, ok := l.waitNeighbour(h, v, l.macs[winner], 3*time.Second); !ok {
					t.Fatalf("%s trial %d: client's neighbour for %s is %v, want %s's %s", mode, trial, v, netlab.Neighbour(h, v), winner, l.macs[winner])
				}
				if _, ok := waitReply(p, podOf(winner), time.Now().Add(-time.Second), 3*time.Second); !ok {
					t.Fatalf("%s trial %d: %s not served by %s", mode, trial, v, podOf(winner))
				}
			}
			if first {
				l.checkOnlyWinnerAnswers(winner)
				first = false
			}

			t0 := time.Now()
			switch mode {
			case "kill":
				l.procs[winner].Stop()
			case "abrupt-stop":
				syscall.Kill(l.procs[winner].Pid(), syscall.SIGUSR1)
			case "link-cut":
				if _, err := l.lab.Switch().Exec(context.Background(), "ip", "link", "set", winner, "down"); err != nil {
					t.Fatal(err)
				}
			}
			for v, p := range probes {
				fam := "IPv4"
				if v.Is6() {
					fam = "IPv6"
				}
				at, ok := l.waitNeighbour(h, v, l.macs[next], failoverMax)
				if !ok {
					t.Fatalf("%s trial %d: %s neighbour did not move to %s within %v (now %v)", mode, trial, v, next, failoverMax, netlab.Neighbour(h, v))
				}
				figs.add(mode+" "+fam+" neighbour moved", at.Sub(t0))
				served, ok := waitReply(p, podOf(next), t0, failoverMax)
				if !ok {
					t.Fatalf("%s trial %d: %s not served by %s within %v", mode, trial, v, next, failoverMax)
				}
				figs.add(mode+" "+fam+" served again", served.Sub(t0))
			}
			for v, p := range probes {
				served, _ := p.firstFrom(podOf(next), t0)
				// The window is closed once a reply past it (and its grace) came in: every
				// probe sent in it has been answered by then, or is lost.
				waitReply(p, podOf(next), served.Add(quietWindow+replyGrace), quietWindow+failoverMax)
				if lost, sent := p.lost(served, served.Add(quietWindow)); lost > 0 {
					t.Errorf("%s trial %d: %s lost %d of %d probes after %s served", mode, trial, v, lost, sent, next)
				}
			}

			if mode == "link-cut" {
				// The cut-off node announced alone all along (two announcers); once the link is
				// back, the memberships merge, next withdraws and the VIPs return to winner.
				out := l.procs[winner].Output()
				if !announcing(out, vip4) || !announcing(out, l.vip6) {
					t.Errorf("link-cut trial %d: the isolated %s stopped announcing", trial, winner)
				}
				t1 := time.Now()
				if _, err := l.lab.Switch().Exec(context.Background(), "ip", "link", "set", winner, "up"); err != nil {
					t.Fatal(err)
				}
				for v := range probes {
					at, ok := l.waitNeighbour(h, v, l.macs[winner], 10*time.Second)
					if !ok {
						t.Fatalf("link-cut trial %d: after healing, %s neighbour is %v, want %s", trial, v, netlab.Neighbour(h, v), winner)
					}
					figs.add("heal neighbour back", at.Sub(t1))
				}
				deadline := time.Now().Add(5 * time.Second)
				for !l.settled(winner) {
					if time.Now().After(deadline) {
						t.Fatalf("link-cut trial %d: two announcers after healing", trial)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			for _, p := range probes {
				p.close()
			}
			l.stopAll()
		}
	}
}

func waitReply(p *prober, pod string, since time.Time, within time.Duration) (time.Time, bool) {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if at, ok := p.firstFrom(pod, since); ok {
			return at, true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, false
}

// checkOnlyWinnerAnswers asks with Debian's arping (not our code) and expects exactly the
// winner's MAC.
func (l *lab) checkOnlyWinnerAnswers(winner string) {
	t := l.t
	ctx := context.Background()
	out, err := l.client.Exec(ctx, "arping", "-c", "3", "-w", "3", "-I", "eth0", vip4.String())
	if err != nil {
		t.Fatalf("arping: %v", err)
	}
	l.expectOnlyMAC(string(out), winner, "arping")
	// IPv6 is checked through the kernel's neighbour table in every trial. ndisc6 does not
	// count here: it accepts only advertisements whose source is the target address itself,
	// and ours come from the interface's link-local address (valid per RFC 4861 7.2.4, and
	// the Linux resolver accepts them), since the node does not own the VIP.
}

func (l *lab) expectOnlyMAC(out, winner, tool string) {
	out = strings.ToLower(out)
	if !strings.Contains(out, l.macs[winner].String()) {
		l.t.Fatalf("%s did not see %s's MAC %s:\n%s", tool, winner, l.macs[winner], out)
	}
	for n, mac := range l.macs {
		if n != winner && strings.Contains(out, mac.String()) {
			l.t.Fatalf("%s saw %s's MAC %s too:\n%s", tool, n, mac, out)
		}
	}
	l.t.Logf("%s: only %s (%s) answers", tool, winner, l.macs[winner])
}
