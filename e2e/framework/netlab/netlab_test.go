package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// request asserts that from reaches the echo server srv at addr and that the server saw want
// as the client address.
func request(t *testing.T, from *Host, network string, addr netip.AddrPort, srv string, want netip.Addr) {
	t.Helper()
	r, err := from.Request(testContext(t), network, addr)
	if err != nil {
		t.Fatalf("%s -> %s %s: %v", from.Name, network, addr, err)
	}
	if r.Server != srv || r.Client.Addr() != want {
		t.Fatalf("%s -> %s %s: reply from %q seeing client %s, want %q seeing %s", from.Name, network, addr, r.Server, r.Client, srv, want)
	}
}

func TestClientReachesPodBehindNode(t *testing.T) {
	lab := New(t, Options{Nodes: 2, Clients: 1, Router: true})
	node1, client := lab.Nodes()[0], lab.Clients()[0]
	web := node1.AddPod(t, "web")
	web.StartEchoServer(t, "tcp", 8080)
	web.StartEchoServer(t, "udp", 8081)

	if !node1.PodCIDR.Contains(web.Addr) || lab.LANPrefix().Contains(web.Addr) {
		t.Fatalf("pod address %s: want inside %s and outside the LAN", web.Addr, node1.PodCIDR)
	}
	request(t, client, "tcp", netip.AddrPortFrom(web.Addr, 8080), "web", client.Addr)
	request(t, client, "udp", netip.AddrPortFrom(web.Addr, 8081), "web", client.Addr)
	request(t, lab.Router(), "tcp", netip.AddrPortFrom(web.Addr, 8080), "web", lab.Router().Addr)

	// A connection stays open and echoes lines after the greeting.
	c, err := client.DialTCP(testContext(t), netip.AddrPortFrom(web.Addr, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("reading greeting: %v", err)
	}
	for _, msg := range []string{"one\n", "two\n"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got, err := br.ReadString('\n'); err != nil || got != msg {
			t.Fatalf("echo of %q: got %q, %v", msg, got, err)
		}
	}
}

func TestPodReachesPodOnOtherNode(t *testing.T) {
	lab := New(t, Options{Nodes: 2})
	a := lab.Nodes()[0].AddPod(t, "a")
	b := lab.Nodes()[1].AddPod(t, "b")
	a.StartEchoServer(t, "tcp", 80)
	b.StartEchoServer(t, "tcp", 80)
	b.StartEchoServer(t, "udp", 53)

	request(t, &a.Host, "tcp", netip.AddrPortFrom(b.Addr, 80), "b", a.Addr)
	request(t, &a.Host, "udp", netip.AddrPortFrom(b.Addr, 53), "b", a.Addr)
	request(t, &b.Host, "tcp", netip.AddrPortFrom(a.Addr, 80), "a", b.Addr)
	// A node reaches another node's pod with its LAN address.
	request(t, &lab.Nodes()[0].Host, "tcp", netip.AddrPortFrom(b.Addr, 80), "b", lab.Nodes()[0].Addr)
}

func TestIPv6ClientAndPods(t *testing.T) {
	lab := New(t, Options{Nodes: 2, Clients: 1, IPv6: true})
	client := lab.Clients()[0]
	a := lab.Nodes()[0].AddPod(t, "a")
	b := lab.Nodes()[1].AddPod(t, "b")
	b.StartEchoServer(t, "tcp", 80)
	b.StartEchoServer(t, "udp", 53)

	if !fd00.Contains(b.Addr6) || !lab.Nodes()[1].PodCIDR6.Contains(b.Addr6) {
		t.Fatalf("pod address %s: want inside %s", b.Addr6, lab.Nodes()[1].PodCIDR6)
	}
	request(t, client, "tcp", netip.AddrPortFrom(b.Addr6, 80), "b", client.Addr6)
	request(t, client, "udp", netip.AddrPortFrom(b.Addr6, 53), "b", client.Addr6)
	request(t, &a.Host, "tcp", netip.AddrPortFrom(b.Addr6, 80), "b", a.Addr6)
	// IPv4 keeps working next to IPv6.
	request(t, client, "tcp", netip.AddrPortFrom(b.Addr, 80), "b", client.Addr)
}

func TestRootLink(t *testing.T) {
	lab := New(t, Options{Nodes: 1, RootLink: true})
	node := lab.Nodes()[0]
	root := lab.RootAddr()
	if !lab.LANPrefix().Contains(root) {
		t.Fatalf("root address %s outside LAN %s", root, lab.LANPrefix())
	}

	// The root namespace reaches a server in the node...
	node.StartEchoServer(t, "tcp", 8080)
	var d net.Dialer
	c, err := d.DialContext(testContext(t), "tcp", netip.AddrPortFrom(node.Addr, 8080).String())
	if err != nil {
		t.Fatalf("root -> node: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil {
		t.Fatalf("root -> node: %v", err)
	}
	r, err := ParseReply(line)
	if err != nil || r.Client.Addr() != root {
		t.Fatalf("root -> node: reply %q (%v), want client %s", line, err, root)
	}

	// ...and the node reaches a listener bound on RootAddr in the root namespace.
	l, err := net.Listen("tcp", netip.AddrPortFrom(root, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Addr, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c.RemoteAddr()
		c.Close()
	}()
	nc, err := node.DialTCP(testContext(t), netip.MustParseAddrPort(l.Addr().String()))
	if err != nil {
		t.Fatalf("node -> root: %v", err)
	}
	nc.Close()
	if got := <-accepted; got == nil || got.(*net.TCPAddr).AddrPort().Addr() != node.Addr {
		t.Fatalf("node -> root: server saw %v, want %s", got, node.Addr)
	}

	// The only root routes into the lab are the LAN's connected route and its local routes.
	routes, err := rootRoutes()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range overlappingRoutes(routes, []netip.Prefix{lab.plan.block4(), lab.plan.block6()}) {
		if !lab.LANPrefix().Contains(r.Addr()) || r.Bits() < lab.LANPrefix().Bits() {
			t.Errorf("unexpected root route into the lab: %s", r)
		}
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	var (
		id       string
		slot     int
		echoPid  int
		strayPid int
	)
	t.Run("lab", func(t *testing.T) {
		lab := New(t, Options{Nodes: 1, Clients: 1, RootLink: true, IPv6: true})
		id, slot = lab.ID(), lab.Slot()
		if !holdsLock(t, slotLockPath(slot)) {
			t.Fatalf("/proc/locks shows no lock of this process on slot %d", slot)
		}
		pod := lab.Nodes()[0].AddPod(t, "web")
		echoPid = pod.StartEchoServer(t, "tcp", 8080).Pid()
		// A process the lab did not start, detached from its shell: Close must find it by
		// its namespace.
		out, err := lab.Nodes()[0].Exec(testContext(t), "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
		if err != nil {
			t.Fatal(err)
		}
		if strayPid, err = parsePid(out); err != nil {
			t.Fatal(err)
		}
		if names, _ := labNamespaces(id); len(names) != 4 {
			t.Fatalf("lab namespaces %v, want switch, node1, client1 and the pod", names)
		}
	})
	if t.Failed() {
		return
	}
	assertGone(t, id, slot, echoPid, strayPid)
}

func TestSweepRemovesLabsOfDeadOwners(t *testing.T) {
	live := New(t, Options{Nodes: 1})

	// Forge the remains of a lab whose owner died: a record naming an exited process, a
	// namespace with a process in it, and an address-less root link into that namespace.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	rec := owner{pid: dead.Process.Pid, start: 1, slot: 15}
	if err := os.WriteFile(ownerPath(id), []byte(rec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hold the record's lock while forging, as an owner does, so that the Sweep of a test
	// binary running concurrently leaves the half-forged lab alone.
	recFile, err := os.Open(ownerPath(id))
	if err != nil {
		t.Fatal(err)
	}
	defer recFile.Close()
	if err := unix.Flock(int(recFile.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ns := id + "-node1"
	if err := createNamespace(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = teardown(id); _ = os.Remove(ownerPath(id)) })
	stray := exec.Command("ip", "netns", "exec", ns, "sleep", "300")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	go stray.Wait() // reap it once killed
	// `ip netns exec` enters the namespace after Start returns; wait until it is there.
	for deadline := time.Now().Add(5 * time.Second); ; {
		pids, err := namespacePIDs(ns)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, stray.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stray process %d never entered %s", stray.Process.Pid, ns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: id + "-root"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(nsh))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}

	recFile.Close() // the owner is dead now
	if err := Sweep(); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	assertGone(t, id, -1, stray.Process.Pid)
	if names, _ := labNamespaces(live.ID()); len(names) != 2 {
		t.Fatalf("Sweep touched the live lab: namespaces %v", names)
	}
	if _, err := os.Stat(ownerPath(live.ID())); err != nil {
		t.Fatalf("Sweep touched the live lab's record: %v", err)
	}
}

func TestParallelLabsGetDistinctSlots(t *testing.T) {
	a := New(t, Options{Nodes: 1})
	b := New(t, Options{Nodes: 1})
	if a.Slot() == b.Slot() || a.LANPrefix().Overlaps(b.LANPrefix()) {
		t.Fatalf("labs share slot %d / %d, LANs %s / %s", a.Slot(), b.Slot(), a.LANPrefix(), b.LANPrefix())
	}
}

// assertGone checks that nothing of lab id remains: namespaces, root links, the owner record,
// the given processes, and (slot >= 0) the slot lock.
func assertGone(t *testing.T, id string, slot int, pids ...int) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	if strings.Contains(string(out), id) {
		t.Errorf("namespaces of %s left:\n%s", id, out)
	}
	links, err := rootLinks()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, id) {
			t.Errorf("root link %s left", l.Attrs().Name)
		}
	}
	if _, err := os.Stat(ownerPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("owner record of %s left: %v", id, err)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
	if slot >= 0 && holdsLock(t, slotLockPath(slot)) {
		// Another test binary may have taken the slot since; only our own lock is a leak.
		t.Errorf("this process still holds slot %d", slot)
	}
}

// holdsLock reports whether /proc/locks lists a lock on path taken by this process.
func holdsLock(t *testing.T, path string) bool {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	// Lines read "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF": pid, then major:minor:inode.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[4] == strconv.Itoa(os.Getpid()) && f[5] == file {
			return true
		}
	}
	return false
}

// waitGone waits up to 5s for pid to exit (a zombie counts as exited: its reaper is not us).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, os.ErrNotExist) || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d still running: %s", pid, stat)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func parsePid(out []byte) (int, error) {
	var pid int
	if _, err := fmt.Sscan(string(out), &pid); err != nil || pid <= 0 {
		return 0, fmt.Errorf("parsing pid from %q: %v", out, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return pid, nil
}

var (
	fd00     = netip.MustParsePrefix("fd00::/8")
	uplink6  = netip.MustParsePrefix("fd00::/64")
	labRange = netip.MustParsePrefix("198.19.0.0/16")
)

func TestPlanStaysInLabRanges(t *testing.T) {
	var blocks []netip.Prefix
	for slot := range slotCount {
		p := plan{slot: slot}
		b4, b6 := p.block4(), p.block6()
		for _, b := range blocks {
			if b.Overlaps(b4) || b.Overlaps(b6) {
				t.Errorf("slot %d block overlaps %s", slot, b)
			}
		}
		blocks = append(blocks, b4, b6)
		if !labRange.Contains(b4.Addr()) || b4.Bits() < labRange.Bits() {
			t.Errorf("slot %d: %s outside %s", slot, b4, labRange)
		}
		if !fd00.Contains(b6.Addr()) || b6.Overlaps(uplink6) {
			t.Errorf("slot %d: %s outside fd00::/8 or overlapping the uplink %s", slot, b6, uplink6)
		}
		inside := []netip.Prefix{p.lan4(), p.lan6(), p.podCIDR4(1), p.podCIDR4(maxNodes), p.podCIDR6(maxNodes)}
		addrs := []netip.Addr{
			p.lanAddr4(rootOctet), p.lanAddr4(clientOct0 + maxClients), p.podAddr4(maxNodes, maxPodsPerNode),
			p.lanAddr6(rootOctet), p.podAddr6(maxNodes, maxPodsPerNode),
		}
		for _, a := range addrs {
			inside = append(inside, netip.PrefixFrom(a, a.BitLen()))
		}
		for _, q := range inside {
			if !(b4.Contains(q.Addr()) || b6.Contains(q.Addr())) {
				t.Errorf("slot %d: %s outside the slot's blocks", slot, q)
			}
		}
	}
	p := plan{slot: 3}
	if got, want := p.lanAddr4(nodeOctet0+1), netip.MustParseAddr("198.19.48.11"); got != want {
		t.Errorf("node1 of slot 3: %s, want %s", got, want)
	}
	if got, want := p.lanAddr6(nodeOctet0+1), netip.MustParseAddr("fd00:c613:3::11"); got != want {
		t.Errorf("node1 of slot 3: %s, want %s", got, want)
	}
	if got, want := p.podAddr6(2, 12), netip.MustParseAddr("fd00:c613:3:2::12"); got != want {
		t.Errorf("pod 12 of node2, slot 3: %s, want %s", got, want)
	}
}

func TestOverlappingRoutes(t *testing.T) {
	lab := []netip.Prefix{netip.MustParsePrefix("198.19.16.0/20"), netip.MustParsePrefix("fd00:c613:1::/48")}
	pfx := func(ss ...string) []netip.Prefix {
		var ps []netip.Prefix
		for _, s := range ss {
			ps = append(ps, netip.MustParsePrefix(s))
		}
		return ps
	}
	tests := []struct {
		name   string
		routes []netip.Prefix
		want   []netip.Prefix
	}{
		{"this machine", pfx("0.0.0.0/0", "198.18.255.0/24", "127.0.0.0/8", "198.18.255.2/32", "fd00::/64", "fe80::/64", "::/0", "ff00::/8"), nil},
		{"other slot", pfx("198.19.0.0/24", "198.19.32.254/32", "fd00:c613:2::/64"), nil},
		{"same LAN", pfx("198.18.255.0/24", "198.19.16.0/24"), pfx("198.19.16.0/24")},
		{"host route inside", pfx("198.19.31.255/32"), pfx("198.19.31.255/32")},
		{"covering route", pfx("198.16.0.0/12", "198.19.0.0/16"), pfx("198.16.0.0/12", "198.19.0.0/16")},
		{"ipv6 inside", pfx("fd00:c613:1:5::/64"), pfx("fd00:c613:1:5::/64")},
		{"ipv6 covering", pfx("fd00::/8"), pfx("fd00::/8")},
		{"neighbours", pfx("198.19.15.0/24", "198.19.32.0/20", "fd00:c613::/48"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := overlappingRoutes(tt.routes, lab)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("overlappingRoutes(%v) = %v, want %v", tt.routes, got, tt.want)
			}
		})
	}
}

func TestParseOwner(t *testing.T) {
	o := owner{pid: 42, start: 123456, slot: 7}
	got, err := parseOwner([]byte(o.String()))
	if err != nil || got != o {
		t.Fatalf("parseOwner(%q) = %+v, %v", o.String(), got, err)
	}
	for _, bad := range []string{"", "pid=42\n", "pid=x\nstart=1\nslot=1\n", "pid=0\nstart=1\nslot=1\n"} {
		if _, err := parseOwner([]byte(bad)); err == nil {
			t.Errorf("parseOwner(%q) succeeded", bad)
		}
	}
}

func TestParseReply(t *testing.T) {
	r, err := ParseReply("web [fd00:c613:1::101]:40000\n")
	if err != nil || r.Server != "web" || r.Client != netip.MustParseAddrPort("[fd00:c613:1::101]:40000") {
		t.Fatalf("ParseReply = %+v, %v", r, err)
	}
	if _, err := ParseReply("garbage"); err == nil {
		t.Fatal("ParseReply(garbage) succeeded")
	}
}
