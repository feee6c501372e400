package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/pki"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// dirPrefix names a cluster's state directory in $TMPDIR and its cgroup in every hierarchy;
// the owner's pid follows it, so that Sweep can tell a dead run's leftovers.
const dirPrefix = "portico-nodes-"

// Options shape a cluster.
type Options struct {
	// Nodes is the number of kubelet nodes (1..12); zero means 3.
	Nodes int
	// Spare reserves lab nodes for Cluster.AddNode (Nodes+Spare at most 12): their addresses,
	// pod CIDRs (which every LAN host routes from the start) and kubelet tokens (the
	// apiserver reads its token file once) are allocated at Start; their namespaces exist on
	// the LAN but run nothing until AddNode starts one.
	Spare int
	// DNS runs CoreDNS (built by k8sbin.EnsureCoreDNS) as the kube-dns Service at
	// DNSServiceIP, the kubelets' clusterDNS.
	DNS bool
	// Clients adds client namespaces on the nodes' LAN (netlab's client1..clientN, Lab.Clients),
	// e.g. for a user reaching a load balancer's VIP.
	Clients int
	// Router adds the lab's router namespace on the LAN (Lab.Router), e.g. for a BGP peer.
	Router bool
	// IPFamilies are the cluster's IP families, the primary first: nil or IPv4Only, DualStack
	// (IPv4 primary) or DualStackIPv6 (IPv6 primary). Dual-stack gives the lab IPv6 (the root
	// link too), the apiserver both Service CIDRs and the primary family's root address, every
	// kubelet both node IPs, every Node both pod CIDRs and the CNI both ranges; kube-dns is in
	// the primary family (Cluster.DNSServiceIP).
	IPFamilies []corev1.IPFamily
	// Logf receives progress lines; New defaults it to t.Logf, Start discards them.
	Logf func(format string, args ...any)
}

// Cluster is a control plane and kubelet nodes on a network lab.
type Cluster struct {
	// Dir holds the cluster's state; its base name is also the cluster's cgroup.
	Dir string
	// Lab is the network lab: the nodes' namespaces, the root link the apiserver listens on.
	Lab *netlab.Lab
	// ControlPlane is etcd, kube-apiserver (Node,RBAC; token per kubelet), kube-controller-manager
	// with every default controller, kube-scheduler.
	ControlPlane *cluster.Cluster
	// Nodes are the kubelet nodes, node1..nodeN, in the order of the lab's nodes, then the
	// nodes AddNode added.
	Nodes []*Node
	// EchoImage is the image of e2e/tools/echoserver, imported on every node (pull policy
	// IfNotPresent or Never: nothing can be pulled).
	EchoImage string
	// Started is how long Start took, from nothing to every node Ready (and CoreDNS Ready,
	// with Options.DNS).
	Started time.Duration

	logf     func(string, ...any)
	families []corev1.IPFamily
	bins     k8sbin.Binaries
	pki      kubeletClientPKI
	pause    Image
	dnsImage Image
	images   []Image
	// spare are the lab nodes reserved for AddNode, not started yet.
	spare []*Node

	closeOnce sync.Once
	closeErr  error
}

// Supported returns why clusters of real kubelets cannot run here, or nil: they need root and
// the programs of internal/prereq (containerd, runc, the CNI plugins, util-linux, iproute2).
func Supported() error {
	return prereq.Host().Check(true, requiredPackages()...)
}

func requiredPackages() []prereq.Package {
	return []prereq.Package{prereq.IPRoute2, prereq.Containerd, prereq.Runc, prereq.CNIPlugins}
}

// New starts a cluster for a test: it fails t naming the fix when the machine lacks what the
// cluster needs (or skips when PORTICO_SKIP_PRIVILEGED=1 allows it), fails t when the cluster
// cannot start, and closes the cluster when t ends.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	prereq.RequireRoot(t, requiredPackages()...)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if c != nil {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("nodes: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("nodes: %v", err)
	}
	return c
}

// Start builds what is missing (kubelet and the control plane from the module proxy, the pause
// and echo server images), then starts the lab, the control plane and every node, and waits
// until every node is Ready. On an error the returned Cluster (if not nil) holds what was
// started; Close it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	begin := time.Now()
	fams, err := families(opts.IPFamilies)
	if err != nil {
		return nil, fmt.Errorf("invalid cluster options: %w", err)
	}
	if opts.Spare < 0 {
		return nil, fmt.Errorf("invalid cluster options: spare nodes %d < 0", opts.Spare)
	}
	if err := Sweep(); err != nil {
		opts.Logf("nodes: sweeping leftovers: %v", err)
	}
	dir, err := cluster.OwnedTempDir(dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, logf: opts.Logf, families: fams}
	if err := c.start(ctx, opts); err != nil {
		return c, err
	}
	c.Started = time.Since(begin)
	opts.Logf("nodes: %d nodes Ready in %s", len(c.Nodes), c.Started.Round(time.Millisecond))
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	begin := time.Now()
	step := func(what string) { c.logf("nodes: %s after %s", what, time.Since(begin).Round(time.Millisecond)) }
	var err error
	if c.bins, err = k8sbin.Ensure(ctx, k8sbin.Options{Log: c.logf}); err != nil {
		return fmt.Errorf("building kubernetes binaries: %w", err)
	}
	// The images build while the lab and the control plane start.
	var images sync.WaitGroup
	var imagesErr error
	images.Go(func() { imagesErr = c.buildImages(ctx, opts.DNS) })
	defer images.Wait() // an early return must not leave the build writing into Dir
	dual := c.DualStack()
	labOpts := netlab.Options{Nodes: opts.Nodes + opts.Spare, Clients: opts.Clients, Router: opts.Router, RootLink: true, IPv6: dual, RootLink6: dual, Logf: c.logf}
	if c.Lab, err = netlab.NewE(labOpts); err != nil {
		return err
	}
	if c.pki, err = writeKubeletClientPKI(c.Dir); err != nil {
		return err
	}
	var tokens []cluster.Token
	for i, ln := range c.Lab.Nodes() {
		n := &Node{Name: ln.Name, Lab: ln, Dir: filepath.Join(c.Dir, ln.Name), Cgroup: filepath.Base(c.Dir) + "/" + ln.Name, families: c.families}
		if n.token, err = pki.Token(); err != nil {
			return err
		}
		tokens = append(tokens, cluster.Token{Token: n.token, User: "system:node:" + n.Name, Groups: []string{"system:nodes"}})
		if i < opts.Nodes {
			c.Nodes = append(c.Nodes, n)
		} else {
			c.spare = append(c.spare, n)
		}
	}
	for _, n := range c.Nodes {
		if err := c.addRoutes(n); err != nil {
			return err
		}
	}
	cpDir := filepath.Join(c.Dir, "control-plane")
	if err := os.Mkdir(cpDir, 0o755); err != nil {
		return err
	}
	var serviceCIDRs []string
	for _, p := range c.ServiceCIDRs() {
		serviceCIDRs = append(serviceCIDRs, p.String())
	}
	c.ControlPlane, err = cluster.Start(ctx, cluster.Options{
		BindAddress:    c.RootAddr(c.PrimaryFamily()),
		ServiceCIDRs:   serviceCIDRs,
		Controllers:    []string{"*"},
		Dir:            cpDir,
		Logf:           c.logf,
		Binaries:       &c.bins,
		Tokens:         tokens,
		NodeAuthorizer: true,
		Scheduler:      true,
		APIServerArgs: []string{
			"--kubelet-client-certificate=" + c.pki.certFile,
			"--kubelet-client-key=" + c.pki.keyFile,
			"--kubelet-preferred-address-types=InternalIP",
			"--allow-privileged=true",
		},
	})
	if err != nil {
		return fmt.Errorf("starting control plane: %w", err)
	}
	step("control plane ready")
	if images.Wait(); imagesErr != nil {
		return imagesErr
	}
	step("images built")
	if err := makeCgroup(filepath.Base(c.Dir)); err != nil {
		return err
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() {
			if err := n.start(ctx, c, nil); err != nil {
				errs[i] = fmt.Errorf("starting %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	step("containerds and kubelets started")
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	step("every node Ready")
	if opts.DNS {
		if err := c.deployDNS(ctx); err != nil {
			return err
		}
		step("CoreDNS Ready")
	}
	return nil
}

// TrustRegistry lets every node's containerd (those running and the spare ones) pull from the
// registry at host (host:port, e.g. on the lab's root link, Lab.RootAddr) over plain HTTP:
// a hosts.toml under each node's registry configuration directory, as
// /etc/containerd/certs.d/<host>/hosts.toml on a real node. containerd reads it at each pull.
func (c *Cluster) TrustRegistry(host string) error {
	for _, n := range append(slices.Clone(c.Nodes), c.spare...) {
		if err := n.trustRegistry(host); err != nil {
			return fmt.Errorf("%s: trusting the registry %s: %w", n.Name, host, err)
		}
	}
	return nil
}

// AddNode starts the next spare lab node (Options.Spare) as a kubelet node that joins the
// running cluster, as a machine added to a cluster does: routes as Start adds them, containerd
// with the cluster's images and then images (more archives, e.g. a DaemonSet's image, which
// the node would pull: its pods can start at once), the kubelet, which registers its Node; it
// returns once every node is Ready. The node is appended to Nodes first, so that Close stops
// it whatever happens; it takes part in cleanup like the others. Not safe to call concurrently
// with other uses of Nodes.
func (c *Cluster) AddNode(ctx context.Context, images ...string) (*Node, error) {
	if len(c.spare) == 0 {
		return nil, errors.New("adding a node: no spare lab node left (start the cluster with Options.Spare)")
	}
	begin := time.Now()
	n := c.spare[0]
	c.spare = c.spare[1:]
	c.Nodes = append(c.Nodes, n)
	if err := c.addRoutes(n); err != nil {
		return n, fmt.Errorf("adding %s: %w", n.Name, err)
	}
	if err := n.start(ctx, c, images); err != nil {
		return n, fmt.Errorf("adding %s: %w", n.Name, err)
	}
	if err := c.waitReady(ctx); err != nil {
		return n, fmt.Errorf("adding %s: %w", n.Name, err)
	}
	c.logf("nodes: %s added and Ready in %s", n.Name, time.Since(begin).Round(time.Millisecond))
	return n, nil
}

// buildImages builds the pause program and the echo server statically and makes an image of
// each.
func (c *Cluster) buildImages(ctx context.Context, dns bool) error {
	moduleDir, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, pkg := range []string{"e2e/tools/pause", "e2e/tools/echoserver"} {
		bin, err := buildStatic(ctx, moduleDir, pkg, dir)
		if err != nil {
			return err
		}
		img, err := binaryImage(bin, dir)
		if err != nil {
			return err
		}
		c.images = append(c.images, img)
	}
	c.pause, c.EchoImage = c.images[0], c.images[1].Ref
	if !dns {
		return nil
	}
	bin, err := k8sbin.EnsureCoreDNS(ctx, k8sbin.Options{Log: c.logf})
	if err != nil {
		return fmt.Errorf("building CoreDNS: %w", err)
	}
	if c.dnsImage, err = binaryImage(bin, dir); err != nil {
		return err
	}
	c.images = append(c.images, c.dnsImage)
	return nil
}

// moduleRoot is the directory of Portico's go.mod (tests run in their package's directory).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("finding the module root: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// waitReady sets each Node's pod CIDRs (the lab's, which the other nodes route to it; one per
// family, the primary first) once the kubelet has registered it, and waits until every node is
// Ready.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs := c.Client()
	return wait.Poll(ctx, 200*time.Millisecond, 2*time.Minute, "every node Ready", func(ctx context.Context) error {
		var notReady []string
		for _, n := range c.Nodes {
			if n.kubelet.Exited() {
				return wait.Stop(fmt.Errorf("kubelet of %s exited: %v\n%s", n.Name, n.kubelet.Err(), n.kubelet.LogTail()))
			}
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				notReady = append(notReady, n.Name+": "+err.Error())
				continue
			}
			if node.Spec.PodCIDR == "" {
				cidrs := n.PodCIDRs()
				quoted := make([]string, len(cidrs))
				for i, p := range cidrs {
					quoted[i] = strconv.Quote(p.String())
				}
				patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%s]}}`, cidrs[0], strings.Join(quoted, ","))
				if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					notReady = append(notReady, n.Name+": setting pod CIDR: "+err.Error())
					continue
				}
			}
			if !NodeReady(node) {
				notReady = append(notReady, n.Name+" not Ready")
			}
		}
		if len(notReady) > 0 {
			return errors.New(strings.Join(notReady, "; "))
		}
		return nil
	})
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Client is an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.ControlPlane.Client() }

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// MACs maps each node's LAN (eth0) MAC to the node's name: which node a layer-2 client's
// neighbour entry for a VIP leads to.
func (c *Cluster) MACs() (map[string]string, error) {
	macs := map[string]string{}
	for _, n := range c.Nodes {
		err := n.Lab.Do(func() error {
			ifc, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			macs[ifc.HardwareAddr.String()] = n.Name
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("mac of %s: %w", n.Name, err)
		}
	}
	return macs, nil
}

// Close kills the nodes' processes and containers, removes their cgroups, stops the control
// plane, closes the lab and removes the state directory. The node's mounts go with its mount
// namespace, the pods' network namespaces with the node's mounts. It is safe to call twice.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		for _, n := range c.Nodes {
			if err := n.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping %s: %w", n.Name, err))
			}
		}
		if err := removeCgroup(filepath.Base(c.Dir), 30*time.Second); err != nil {
			errs = append(errs, err)
		}
		if c.ControlPlane != nil {
			if err := c.ControlPlane.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if c.Lab != nil {
			if err := c.Lab.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// RSS is the resident memory of the whole cluster in bytes: the control-plane processes and
// every process in the nodes' cgroups (kubelets, containerds, shims, containers, holders).
func (c *Cluster) RSS() (uint64, error) {
	pids, err := cgroupPIDs(filepath.Base(c.Dir))
	if err != nil {
		return 0, err
	}
	for _, pid := range c.ControlPlane.PIDs() {
		pids = append(pids, pid)
	}
	var total uint64
	for _, pid := range pids {
		kb, err := rssKiB(pid)
		if err != nil {
			continue // exited meanwhile
		}
		total += kb * 1024
	}
	return total, nil
}

// rssKiB reads VmRSS from /proc/PID/status.
func rssKiB(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, nil // a kernel thread or a zombie
}
