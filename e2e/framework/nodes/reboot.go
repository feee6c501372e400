package nodes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
)

// Boot is what Reboot measured of one node's reboot.
type Boot struct {
	// Down is when the node's processes were dead and its volatile state gone; Up is when its
	// processes started again (Down plus the flush): times to count a recovery from.
	Down, Up time.Time
	// ContainerdReady is when containerd answered on its socket again; KubeletStarted is when
	// the kubelet was started.
	ContainerdReady, KubeletStarted time.Time
}

// Reboot turns node n off and on as a machine reboots, keeping its disk and network:
//
//   - off: SIGKILL to the kubelet, containerd and every process of the node's cgroups (shims,
//     every container, the holder); the node's mount namespace goes with the holder, and
//     with it every mount and the pods' network namespaces (their veths and routes);
//   - what a reboot clears: the netfilter ruleset of the node's network namespace (every table
//     of every family: iptables-nft's, kube-proxy's, any service proxy's), its conntrack table,
//     and the directories that are tmpfs on a real node (/run, containerd's state);
//   - what stays: the node's interfaces, addresses and routes (its network configuration),
//     /var/lib (the kubelet's root, containerd's root with every image, the CNI IPAM store),
//     the Node object and the pods bound to it;
//   - on: the holder, containerd, the kubelet, as Start starts them (no image is imported:
//     containerd kept them; the logs of the boot before are kept as NAME-before-reboot.log).
//     The kubelet then starts the node's pods again in new sandboxes.
//
// It returns once the kubelet runs; what follows (the Node's heartbeat, pods Ready) is for the
// caller to wait for. Not safe to call concurrently with other uses of n.
func (c *Cluster) Reboot(ctx context.Context, n *Node) (Boot, error) {
	var b Boot
	if n.kubelet == nil {
		return b, fmt.Errorf("rebooting %s: not started", n.Name)
	}
	if err := n.stop(); err != nil {
		return b, fmt.Errorf("rebooting %s: turning it off: %w", n.Name, err)
	}
	for _, name := range []string{"holder", "containerd", "kubelet"} { // the next boot truncates them
		_ = os.Rename(n.logPath(name), n.logPath(name+"-before-reboot"))
	}
	if err := n.clearVolatile(); err != nil {
		return b, fmt.Errorf("rebooting %s: %w", n.Name, err)
	}
	b.Down = time.Now()
	c.logf("nodes: %s off: processes killed, rules, conntrack, /run and containerd's state cleared", n.Name)
	b.Up = time.Now()
	if err := n.boot(ctx, c, &b); err != nil {
		return b, fmt.Errorf("rebooting %s: %w", n.Name, err)
	}
	return b, nil
}

// clearVolatile clears what a reboot clears of a node whose processes are dead: its
// netfilter ruleset and conntrack table, and the contents of its /run and containerd state
// directories (tmpfs on a real node).
func (n *Node) clearVolatile() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := n.Lab.Exec(ctx, "nft", "flush", "ruleset"); err != nil {
		return fmt.Errorf("flushing the netfilter ruleset: %w: %s", err, out)
	}
	err := n.Lab.Do(func() error {
		return errors.Join(netlink.ConntrackTableFlush(netlink.ConntrackTable), netlink.ConntrackTableFlush(netlink.ConntrackExpectTable))
	})
	if err != nil {
		return fmt.Errorf("flushing conntrack: %w", err)
	}
	for _, dir := range []string{filepath.Join(n.Dir, "run"), filepath.Join(n.Dir, "containerd", "state")} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("clearing %s: %w", dir, err)
			}
		}
	}
	return nil
}

// boot starts a node that was turned off: as start, which imports no image again (containerd's
// root kept them).
func (n *Node) boot(ctx context.Context, c *Cluster, b *Boot) error {
	err := n.start(ctx, c, nil)
	b.ContainerdReady, b.KubeletStarted = n.containerdReady, n.kubeletStarted
	return err
}
