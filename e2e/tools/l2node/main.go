// Command l2node runs the layer-2 announcement pieces of portico-agent without a control plane,
// for the network-namespace tests of e2e/suites/l2election: membership (package membership), the
// election (package announce/election) over a fixed list of node names, and the ARP/NDP
// announcer (package announce/l2) for the VIPs this node wins. Run it inside a node namespace.
//
// It prints "ready" once it has joined its peers, "announce VIP" and "withdraw VIP" as its set
// changes, and "view N1,N2" when membership changes. SIGTERM leaves the membership gracefully and
// exits; SIGUSR1 stops membership and announcer abruptly (no leave, as a crash would) and keeps
// the process idle until killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/nodeproxy/announce/election"
	"github.com/portico-lb/portico/nodeproxy/announce/l2"
	"github.com/portico-lb/portico/nodeproxy/membership"
)

func main() {
	log.SetFlags(log.Lmicroseconds)
	node := flag.String("node", "", "this node's name")
	bind := flag.String("bind", "", "this node's IP: membership binds to it")
	port := flag.Int("port", membership.DefaultPort, "membership port")
	peers := flag.String("peers", "", "comma-separated IPs of the other nodes")
	nodes := flag.String("nodes", "", "comma-separated names of every node (the election's Node list)")
	vips := flag.String("vips", "", "comma-separated VIPs to elect an announcer for")
	ifname := flag.String("interface", "eth0", "interface to answer ARP/NDP on")
	secret := flag.String("secret-file", "", "membership secret file (optional)")
	verbose := flag.Int("v", 0, "log verbosity")
	flag.Parse()

	logger := funcr.New(func(prefix, args string) { log.Println(prefix, args) }, funcr.Options{Verbosity: *verbose})
	if err := run(logger, *node, *bind, *port, *peers, *nodes, *vips, *ifname, *secret); err != nil {
		log.Fatal(err)
	}
}

func run(logger logr.Logger, node, bind string, port int, peers, nodes, vips, ifname, secret string) error {
	cfg := membership.DefaultConfig()
	cfg.NodeName, cfg.Port, cfg.Log = node, port, logger.WithName("membership")
	cfg.RejoinInterval = time.Second
	var err error
	if cfg.BindAddr, err = netip.ParseAddr(bind); err != nil {
		return fmt.Errorf("-bind: %w", err)
	}
	if secret != "" {
		if cfg.SecretKey, err = membership.LoadSecretKey(secret); err != nil {
			return err
		}
	}
	peerAddrs, err := parseAddrs(peers)
	if err != nil {
		return fmt.Errorf("-peers: %w", err)
	}
	vipAddrs, err := parseAddrs(vips)
	if err != nil {
		return fmt.Errorf("-vips: %w", err)
	}
	var nodeObjs []*corev1.Node
	for _, n := range split(nodes) {
		nodeObjs = append(nodeObjs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}

	m, err := membership.Start(cfg)
	if err != nil {
		return err
	}
	// Join before the first election: a node alone in its view would claim every VIP. Joins
	// run in the background; wait for the first (up to firstJoinMax: the first node to start
	// has nobody to join yet).
	m.SetPeers(peerAddrs)
	waitFirstJoin(m, len(peerAddrs) > 0)
	ann := l2.New(l2.Options{Log: logger.WithName("l2"), Gratuitous: 4, GratuitousInterval: 500 * time.Millisecond})
	fmt.Println("ready")

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	serving := map[netip.Addr]bool{}
	lastView := 0
	sync := func() {
		alive := m.Alive()
		fmt.Println("view", strings.Join(sortedNames(alive), ","))
		var set []l2.VIP
		won := map[netip.Addr]bool{}
		for _, v := range vipAddrs {
			w, ok := election.Winner(election.Input{VIP: v, Nodes: nodeObjs, Alive: func(n string) bool { return alive[n] }})
			if ok && w == node {
				set = append(set, l2.VIP{Addr: v, Interfaces: []string{ifname}})
				won[v] = true
			}
		}
		if err := ann.Set(set...); err != nil {
			logger.Error(err, "Setting announcements")
		}
		for _, v := range vipAddrs {
			switch {
			case won[v] && !serving[v]:
				fmt.Println("announce", v)
			case !won[v] && serving[v]:
				fmt.Println("withdraw", v)
			}
		}
		// A view that grew may be a healed partition: re-announce what stayed ours.
		if len(alive) > lastView && lastView > 0 {
			ann.Reannounce()
		}
		serving, lastView = won, len(alive)
	}
	sync()
	for {
		select {
		case <-m.Changes():
			sync()
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				m.Abort()
				ann.Stop()
				fmt.Println("stopped")
				for {
					time.Sleep(time.Hour) // idle until killed
				}
			}
			ann.Stop()
			return m.Stop(time.Second)
		}
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range split(s) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func sortedNames(m map[string]bool) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// firstJoinMax bounds the wait for the first join.
const firstJoinMax = 2 * time.Second

// waitFirstJoin waits until m's view holds another node, for up to firstJoinMax (not at all
// without peers).
func waitFirstJoin(m *membership.Membership, peers bool) {
	deadline := time.After(firstJoinMax)
	for peers && len(m.Alive()) < 2 {
		select {
		case <-m.Changes():
		case <-deadline:
			return
		}
	}
}
