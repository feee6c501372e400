package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// Node is one kubelet node: a lab node namespace (its network), a holder process that owns the
// node's mount and UTS namespaces, containerd and kubelet entered into all three, and a cgroup
// subtree holding all of them and every container.
type Node struct {
	// Name is the Node object's name and the node's hostname: node1, node2, ...
	Name string
	// Lab is the node's network namespace in the lab; Lab.Addr (and Lab.Addr6 in a dual-stack
	// cluster) are the node's InternalIPs (Addrs).
	Lab *netlab.Node
	// Dir holds the node's state: containerd's root and state, kubelet's root and
	// certificates, the directories mounted over /var/lib, /var/log and /run, logs.
	Dir string
	// Cgroup is the node's cgroup, relative to every hierarchy's root; kubelet's cgroupRoot.
	Cgroup string

	families   []corev1.IPFamily
	token      string
	holder     *process.Process
	containerd *process.Process
	kubelet    *process.Process
	// imported: containerd's root holds the cluster's images (a rebooted node keeps them).
	imported bool
	// containerdReady and kubeletStarted are the times of the last start's steps.
	containerdReady, kubeletStarted time.Time
}

// ContainerdSocket is the node's containerd socket, reachable from this namespace too.
func (n *Node) ContainerdSocket() string {
	return filepath.Join(n.Dir, "containerd", "containerd.sock")
}

func (n *Node) logPath(name string) string { return filepath.Join(n.Dir, name+".log") }

// LogTails are the ends of the node's process logs, for failure messages.
func (n *Node) LogTails() string {
	var b strings.Builder
	for _, p := range []*process.Process{n.holder, n.containerd, n.kubelet} {
		if p != nil {
			b.WriteString(p.LogTail())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// startInCgroup starts argv through sh, which first moves itself into the node's daemon
// cgroup in every hierarchy, so that nothing the daemon forks (containerd's shims) can escape
// the node's subtree.
func (n *Node) startInCgroup(name string, logf func(string, ...any), argv ...string) (*process.Process, error) {
	files, err := cgroupProcsFiles(n.Cgroup + "/daemons")
	if err != nil {
		return nil, err
	}
	const script = `for f in $PORTICO_CGROUP_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`
	return process.Start("sh", process.Options{
		Name:    n.Name + "/" + name,
		Args:    append([]string{"-c", script, "sh"}, argv...),
		Env:     append(os.Environ(), "PORTICO_CGROUP_PROCS="+strings.Join(files, " ")),
		LogPath: n.logPath(name),
		Logf:    logf,
	})
}

// holderScript runs in the node's new mount and UTS namespaces (private propagation): it drops
// the copies of the machine's named network namespaces (they would keep other labs'
// namespaces alive), mounts the node's own directories over /var/lib, /var/log and /run (so
// kubelets do not share /var/log/pods, the CNI cache, shim sockets or hostPath volumes), sets
// the hostname and then waits to be killed. Every mount of the node lives in this namespace and
// vanishes with its last process.
const holderScript = `set -e
umount -R -l /run/netns 2>/dev/null || true
mount --bind "$1" /var/lib
mount --bind "$2" /var/log
mount --bind "$3" /run
hostname "$4"
echo ready
exec sleep infinity`

// start brings the node up: directories, holder, containerd with the cluster's images and the
// archives extra (at the first start only: a rebooted node's containerd kept them), kubelet.
func (n *Node) start(ctx context.Context, c *Cluster, extra []string) error {
	begin := time.Now()
	step := func(what string) {
		c.logf("nodes: %s: %s after %s", n.Name, what, time.Since(begin).Round(time.Millisecond))
	}
	for _, d := range []string{"var-lib", "var-log", "run", "containerd", "cni", "kubelet", "pki", "pods"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return fmt.Errorf("creating node directory: %w", err)
		}
	}
	if err := makeCgroup(n.Cgroup + "/daemons"); err != nil {
		return err
	}
	var err error
	n.holder, err = n.startInCgroup("holder", c.logf, "nsenter", "--net="+filepath.Join("/run/netns", n.Lab.NS), "--",
		"unshare", "--mount", "--uts", "--propagation", "private", "--",
		"sh", "-c", holderScript, "sh",
		filepath.Join(n.Dir, "var-lib"), filepath.Join(n.Dir, "var-log"), filepath.Join(n.Dir, "run"), n.Name)
	if err != nil {
		return err
	}
	if err := waitLog(ctx, n.holder, "ready", 20*time.Second); err != nil {
		return err
	}
	step("namespaces ready")
	if err := n.writeContainerdConfig(c); err != nil {
		return err
	}
	enter := []string{"nsenter", fmt.Sprintf("--target=%d", n.holder.Pid()), "--net", "--mount", "--uts", "--"}
	n.containerd, err = n.startInCgroup("containerd", c.logf, append(enter, "containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))...)
	if err != nil {
		return err
	}
	err = waitProcess(ctx, n.containerd, "containerd's socket", 30*time.Second, func() error {
		conn, err := net.Dial("unix", n.ContainerdSocket())
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		return err
	}
	step("containerd ready")
	n.containerdReady = time.Now()
	if !n.imported {
		for _, img := range c.images {
			if err := n.ImportImage(ctx, img.Archive); err != nil {
				return err
			}
		}
		for _, archive := range extra {
			if err := n.ImportImage(ctx, archive); err != nil {
				return err
			}
		}
		n.imported = true
		step("images imported")
	}
	if err := n.writeKubeletConfig(c); err != nil {
		return err
	}
	n.kubelet, err = n.startInCgroup("kubelet", c.logf, append(enter, c.bins.Kubelet,
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(n.Dir, "kubeconfig"),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+joinAddrs(n.Addrs()),
		"--v=0",
	)...)
	n.kubeletStarted = time.Now()
	return err
}

// ImportImage loads an image archive (OCI layout or docker-archive tar) into the node's
// containerd, in the namespace the kubelet's CRI uses, with `ctr images import`: its pods
// can then run it with ImagePullPolicy Never or IfNotPresent.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	out, err := process.Run(ctx, "ctr", "--address", n.ContainerdSocket(), "--namespace", "k8s.io", "images", "import", archive)
	if err != nil {
		return fmt.Errorf("importing %s on %s: %w: %s", filepath.Base(archive), n.Name, err, out)
	}
	return nil
}

// stop kills kubelet and containerd (the cluster is torn down: nothing is drained), then
// everything left in the node's cgroup subtree (shims, containers, the holder), and removes
// the subtree.
func (n *Node) stop() error {
	for _, p := range []*process.Process{n.kubelet, n.containerd, n.holder} {
		if p != nil {
			_ = p.Kill()
		}
	}
	return removeCgroup(n.Cgroup, 30*time.Second)
}

// containerdConfig is containerd 1.6's configuration (version 2) for one node: its own root,
// state and sockets, no debug or metrics listeners, the CRI plugin with the local pause image
// (restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot raise oom_score_adj), network
// namespaces under the state dir, the stream server on the node's loopback, runc with the
// cgroupfs driver, CNI from Debian's plugins with a per-node configuration directory.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`

// registryHostsDir is the node's containerd's registry host configuration directory
// (config_path: <registry host>/hosts.toml each, read at every pull; Cluster.TrustRegistry).
func (n *Node) registryHostsDir() string { return filepath.Join(n.Dir, "certs.d") }

// trustRegistry lets the node's containerd pull from the registry at host (host:port) over
// plain HTTP, as a node's /etc/containerd/certs.d/<host>/hosts.toml does.
func (n *Node) trustRegistry(host string) error {
	dir := filepath.Join(n.registryHostsDir(), host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// cniBinDir is where Debian's containernetworking-plugins installs ptp, host-local and portmap.
const cniBinDir = "/usr/lib/cni"

func (n *Node) writeContainerdConfig(c *Cluster) error {
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(n.Dir, "containerd", "root"),
		filepath.Join(n.Dir, "containerd", "state"),
		n.ContainerdSocket(),
		n.ContainerdSocket()+".ttrpc",
		c.pause.Ref,
		cniBinDir,
		filepath.Join(n.Dir, "cni"),
		n.registryHostsDir(),
	)
	if err := os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	// ptp: one veth per pod and a /32 (/128) route on the node (no bridge, so br_netfilter
	// does not matter); host-local hands out the node's pod CIDRs (one range set per family,
	// the primary first), their .1 (::1) being the node's end of every pod veth; portmap for
	// hostPort.
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, p := range n.PodCIDRs() {
		ranges = append(ranges, []map[string]string{{"subnet": p.String()}})
		def := "0.0.0.0/0"
		if p.Addr().Is6() {
			def = "::/0"
		}
		routes = append(routes, map[string]string{"dst": def})
	}
	conflist := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "portico-lab",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  ranges,
					"routes":  routes,
					"dataDir": filepath.Join(n.Dir, "cni-ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "cni", "10-portico.conflist"), b, 0o644)
}

func (n *Node) writeKubeletConfig(c *Cluster) error {
	if err := c.ControlPlane.WriteKubeconfigWithToken(filepath.Join(n.Dir, "kubeconfig"), c.ControlPlane.Host(), n.token); err != nil {
		return fmt.Errorf("writing kubelet kubeconfig: %w", err)
	}
	cfg := kubeletconfig.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		// These machines run cgroup v1 (hybrid), without systemd.
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               "/" + n.Cgroup,
		ContainerRuntimeEndpoint: "unix://" + n.ContainerdSocket(),
		Address:                  n.Addrs()[0].String(), // the apiserver reaches the kubelet at the first InternalIP
		ReadOnlyPort:             0,
		Authentication: kubeletconfig.KubeletAuthentication{
			X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: c.pki.caFile},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeWebhook},
		PodLogsDir:    filepath.Join(n.Dir, "pods"),
		ClusterDomain: DNSDomain,
		FailSwapOn:    ptr.To(false),
		OOMScoreAdj:   ptr.To[int32](0),
		// Images are imported, never pulled: garbage collection must never remove them.
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		// The nodes share one machine's disk and memory: evict only in earnest.
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "1%",
		},
		ResolverConfig: ptr.To("/etc/resolv.conf"),
	}
	if c.dnsImage.Ref != "" {
		cfg.ClusterDNS = []string{c.DNSServiceIP().String()}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), b, 0o644)
}

// waitLog waits until p's log contains text.
func waitLog(ctx context.Context, p *process.Process, text string, timeout time.Duration) error {
	return waitProcess(ctx, p, fmt.Sprintf("%q in the log of %s", text, p.Name()), timeout, func() error {
		b, err := os.ReadFile(p.LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), text) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// waitProcess polls check until it succeeds, failing early when p exits; the error carries
// p's log tail.
func waitProcess(ctx context.Context, p *process.Process, what string, timeout time.Duration, check func() error) error {
	err := wait.Poll(ctx, 100*time.Millisecond, timeout, what, func(context.Context) error {
		if p.Exited() {
			return wait.Stop(fmt.Errorf("%s exited: %v", p.Name(), p.Err()))
		}
		return check()
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, p.LogTail())
	}
	return nil
}
