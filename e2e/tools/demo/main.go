// Command demo shows Portico at work on a real, local control plane and, when it can, with real
// packets.
//
// It starts a network lab (e2e/netlab: two node namespaces and a client namespace on one LAN,
// addresses from 198.19.0.0/16) and etcd, kube-apiserver and kube-controller-manager
// (e2e/cluster) listening on the lab's root address, registers the two lab nodes and runs
// portico-agent in each node namespace. It runs the portico-controller binary with the reference
// provider (VIPs from 198.18.128.0/28), adds an echo-server pod on each node and creates
// LoadBalancer Services: demo/web selecting the two pods, one of another class and one with a bad
// annotation, and prints what `kubectl describe service` would show for each. The client then
// sends TCP requests to demo/web's VIP, routed to node1 by a route in the client's namespace
// that stands in for the router (or the bare-metal announcer, not written yet), and the demo
// prints which pod answered and the client address the pod saw. Finally it deletes demo/web,
// shows the finalizer releasing it and the VIP going dark.
//
// Without root, the ip command or iptables-restore the lab cannot run (nor when a route of this
// machine overlaps the lab's addresses): the demo says why and runs the controller part alone on
// a loopback control plane. Everything it starts (processes,
// namespaces, the lab's root link, temporary files) is removed on exit, also on Ctrl-C or error.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/cluster"
	"github.com/portico-lb/portico/e2e/netlab"
)

const (
	class = "portico-lb.io/demo"
	// pool is the reference provider's VIP range, inside cluster.LBPoolCIDR (198.18.128.0/17).
	pool = "198.18.128.0/28"
	// echoPort is where the pods' echo servers listen (the Service's targetPort).
	echoPort = 8080
	requests = 10
)

func main() {
	// After the first Ctrl-C (or SIGTERM) ctx is cancelled and further ones are ignored, so that
	// the cleanup, which runs as run returns, is not cut short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "\ndemo: interrupted; stopping everything it started")
		case <-finished:
		}
	}()
	start := time.Now()
	err := run(ctx)
	close(finished)
	if ctx.Err() != nil {
		log.Fatalf("demo: interrupted; everything it started is stopped and removed")
	}
	if err != nil {
		log.Fatalf("demo: %v", err)
	}
	fmt.Printf("Demo took %s.\n", time.Since(start).Round(100*time.Millisecond))
}

// demo is what one run works with; lab is nil in the controller-only variant.
type demo struct {
	ctx   context.Context
	dir   string // binaries and logs, removed on exit
	lab   *netlab.Lab
	c     *cluster.Cluster
	cs    kubernetes.Interface
	bins  map[string]string // package name -> binary
	ctlog string            // portico-controller's log file
}

func run(ctx context.Context) (err error) {
	d := &demo{ctx: ctx, bins: map[string]string{}}
	if d.dir, err = cluster.OwnedTempDir("portico-demo-"); err != nil {
		return err
	}
	defer os.RemoveAll(d.dir)

	withLab := true
	if why := labUnsupported(); why != nil {
		withLab = false
		step("No network lab: " + why.Error())
		fmt.Println("Running the controller part only (no agent, no packets).")
	}

	pkgs := []string{"portico-controller"}
	if withLab {
		pkgs = append(pkgs, "portico-agent", "echoserver")
	}
	step("Building " + strings.Join(pkgs, ", "))
	if err := d.build(pkgs...); err != nil {
		return err
	}

	if withLab {
		step("Starting a network lab: node1, node2 and client1 on one LAN, plus a link to this namespace")
		lab, err := netlab.NewE(netlab.Options{Nodes: 2, Clients: 1, RootLink: true})
		switch {
		case errors.Is(err, netlab.ErrRootRouteOverlap):
			// Nothing was added; the controller part still runs.
			withLab = false
			fmt.Printf("No network lab: %v\nRunning the controller part only (no agent, no packets).\n", err)
		case err != nil:
			return err
		default:
			d.lab = lab
			defer func() {
				if cerr := lab.Close(); cerr != nil {
					err = errors.Join(err, cerr)
				}
			}()
			d.printLab()
		}
	}

	opts := cluster.Options{Controllers: []string{}} // the controller alone needs no kube-controller-manager
	if d.lab != nil {
		// The agents in the node namespaces reach the apiserver over the lab's root link; the
		// real EndpointSlice controller turns the pods into endpoints.
		opts = cluster.Options{BindAddress: d.lab.RootAddr(), Controllers: cluster.DefaultControllers}
		step("Starting a local control plane (etcd, kube-apiserver, kube-controller-manager)")
	} else {
		step("Starting a local control plane (etcd, kube-apiserver)")
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	d.c, d.cs = c, c.Client()
	fmt.Printf("kube-apiserver at %s\n", c.Host())

	step("Starting portico-controller (provider: reference, pool " + pool + ", class " + class + ")")
	stopCtl, err := d.startController()
	if err != nil {
		return err
	}
	defer stopCtl()

	if err := c.EnsureNamespace(ctx, "demo"); err != nil {
		return err
	}
	if d.lab != nil {
		if err := d.startNodes(); err != nil {
			return err
		}
		if err := d.startPods(); err != nil {
			return err
		}
	} else {
		for i, ip := range []string{"198.19.0.11", "198.19.0.12"} {
			if _, err := c.RegisterNode(ctx, cluster.NodeSpec{Name: fmt.Sprintf("node-%d", i+1), InternalIPs: []netip.Addr{netip.MustParseAddr(ip)}}); err != nil {
				return err
			}
		}
	}

	if err := d.services(); err != nil {
		return err
	}
	var vip netip.Addr
	if d.lab != nil {
		if vip, err = d.traffic(); err != nil {
			return err
		}
	}

	step("Deleting demo/web: the provider releases the address, then the finalizer goes")
	if err := d.cs.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool {
		_, err := d.cs.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}); err != nil {
		return err
	}
	fmt.Println("demo/web is gone.")
	if d.lab != nil {
		if err := d.vipGone(vip); err != nil {
			return err
		}
	}
	step("Done; stopping everything")
	return nil
}

// labUnsupported says why the lab cannot run here, or returns nil.
func labUnsupported() error {
	if err := netlab.Supported(); err != nil {
		return err
	}
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		return errors.New("portico-agent needs iptables-restore (Debian package iptables)")
	}
	return nil
}

// build builds the named binaries (packages under ./cmd, or e2e/tools/echoserver) into d.dir.
// The agent is static: it runs under `ip netns exec`, like the cluster's other static binaries.
func (d *demo) build(names ...string) error {
	for _, name := range names {
		pkg := "./cmd/" + name
		if name == "echoserver" {
			pkg = "./e2e/tools/echoserver"
		}
		bin := filepath.Join(d.dir, name)
		cmd := exec.CommandContext(d.ctx, "go", "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", pkg, err, out)
		}
		d.bins[name] = bin
	}
	return nil
}

func (d *demo) printLab() {
	l := d.lab
	fmt.Printf("lab %s, LAN %s (namespaces %s-*; this namespace is %s on link %s-root)\n",
		l.ID(), l.LANPrefix(), l.ID(), l.RootAddr(), l.ID())
	for _, n := range l.Nodes() {
		fmt.Printf("  %-8s %-14s pods %s\n", n.Name, n.Addr, n.PodCIDR)
	}
	for _, h := range l.Clients() {
		fmt.Printf("  %-8s %s\n", h.Name, h.Addr)
	}
}

// startController runs portico-controller and returns the function that stops it.
func (d *demo) startController() (func(), error) {
	d.ctlog = filepath.Join(d.dir, "portico-controller.log")
	logFile, err := os.Create(d.ctlog)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.bins["portico-controller"], "--kubeconfig="+d.c.KubeconfigPath(), "--class="+class+"=reference",
		"--reference-pool="+pool, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C reaches only the demo, which stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	}, nil
}

// startNodes registers the lab's nodes and starts portico-agent in each node namespace. The
// agents are lab processes: lab.Close kills them at the latest.
func (d *demo) startNodes() error {
	var cidrs []string
	for _, n := range d.lab.Nodes() {
		cidrs = append(cidrs, n.PodCIDR.String())
		spec := cluster.NodeSpec{Name: n.Name, InternalIPs: []netip.Addr{n.Addr}, PodCIDRs: []netip.Prefix{n.PodCIDR}}
		if _, err := d.c.RegisterNode(d.ctx, spec); err != nil {
			return err
		}
	}
	// The agents run in the node namespaces and reach the apiserver at the lab address.
	kubeconfig := filepath.Join(d.dir, "agent.kubeconfig")
	if err := d.c.WriteKubeconfig(kubeconfig, d.c.Host()); err != nil {
		return err
	}
	step("Registering the lab nodes; starting portico-agent in each node's namespace")
	for _, n := range d.lab.Nodes() {
		p, err := n.Start(d.bins["portico-agent"],
			"--kubeconfig="+kubeconfig,
			"--node-name="+n.Name,
			"--cluster-cidr="+strings.Join(cidrs, ","),
			"--min-sync-period=200ms",
			"--metrics-bind-address=0",
			"-v=1", // the "Synced" line
		)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(d.ctx, 60*time.Second)
		err = p.WaitFor(ctx, `"Synced"`)
		cancel()
		if err != nil {
			return fmt.Errorf("portico-agent on %s: %w", n.Name, err)
		}
		fmt.Printf("  Node %s: InternalIP %s, PodCIDR %s; portico-agent (pid %d) wrote its first iptables rules\n",
			n.Name, n.Addr, n.PodCIDR, p.Pid())
	}
	return nil
}

// startPods adds a pod namespace with an echo server to each node and registers it as a Ready
// Pod labelled app=web, as a kubelet would.
func (d *demo) startPods() error {
	step(fmt.Sprintf("Starting an echo server (TCP %d) in a pod on each node; Pods labelled app=web", echoPort))
	for _, n := range d.lab.Nodes() {
		name := "web-" + n.Name
		p, err := n.AddPodE(name)
		if err != nil {
			return err
		}
		proc, err := p.Start(d.bins["echoserver"], "-name", name, "-tcp", fmt.Sprint(echoPort))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(d.ctx, 15*time.Second)
		err = proc.WaitFor(ctx, "ready")
		cancel()
		if err != nil {
			return fmt.Errorf("echo server in %s: %w", name, err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Labels: map[string]string{"app": "web"}}}
		pod.Spec.Containers = []corev1.Container{{Name: "echo", Image: "portico.invalid/echoserver",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: echoPort}}}}
		if _, err := d.c.CreateReadyPod(d.ctx, pod, n.Name, p.Addr); err != nil {
			return err
		}
		fmt.Printf("  pod demo/%-14s on %s, IP %s, Ready\n", name, n.Name, p.Addr)
	}
	return nil
}

// services creates the three Services, waits for demo/web's address and describes them all.
func (d *demo) services() error {
	step("Creating Service demo/web (type LoadBalancer, class " + class + ", TCP 80 + UDP 53, selector app=web)")
	if err := d.create("web", ptr.To(class), nil); err != nil {
		return err
	}
	step("Creating Service demo/elsewhere (class example.com/other: not Portico's)")
	if err := d.create("elsewhere", ptr.To("example.com/other"), nil); err != nil {
		return err
	}
	step("Creating Service demo/typo (annotation portico-lb.io/internal: \"yes\")")
	if err := d.create("typo", ptr.To(class), map[string]string{"portico-lb.io/internal": "yes"}); err != nil {
		return err
	}
	if err := waitFor(d.ctx, func() bool {
		s, err := d.cs.CoreV1().Services("demo").Get(d.ctx, "web", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) > 0
	}); err != nil {
		return fmt.Errorf("demo/web never got an address (controller log: %s): %w", d.ctlog, err)
	}
	// Let the controller finish with the other two (conditions, events).
	time.Sleep(time.Second)
	for _, name := range []string{"web", "elsewhere", "typo"} {
		if err := d.describe(name); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) create(name string, cls *string, ann map[string]string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Annotations: ann},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: cls,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
		},
	}
	_, err := d.cs.CoreV1().Services("demo").Create(d.ctx, svc, metav1.CreateOptions{})
	return err
}

// describe prints the parts of `kubectl describe service` that Portico writes.
func (d *demo) describe(name string) error {
	s, err := d.cs.CoreV1().Services("demo").Get(d.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("\n$ kubectl describe service -n demo %s   (abridged)\n", name)
	fmt.Printf("Name:                     %s\n", s.Name)
	fmt.Printf("LoadBalancer Class:       %s\n", ptr.Deref(s.Spec.LoadBalancerClass, "<unset>"))
	fmt.Printf("Finalizers:               %s\n", strings.Join(s.Finalizers, ","))
	var ing []string
	for _, i := range s.Status.LoadBalancer.Ingress {
		mode := ""
		if i.IPMode != nil {
			mode = " (" + string(*i.IPMode) + ")"
		}
		ing = append(ing, i.IP+i.Hostname+mode)
	}
	fmt.Printf("LoadBalancer Ingress:     %s\n", strings.Join(ing, ", "))
	if d.lab != nil && name == "web" {
		eps, err := d.endpoints(name)
		if err != nil {
			return err
		}
		fmt.Printf("Endpoints:                %s\n", strings.Join(eps, ","))
	}
	for _, cond := range s.Status.Conditions {
		fmt.Printf("Condition:                %s=%s  %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	evs, err := d.cs.CoreV1().Events("demo").List(d.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	fmt.Println("Events:")
	if len(evs.Items) == 0 {
		fmt.Println("  <none>")
	}
	for _, e := range evs.Items {
		fmt.Printf("  %-8s %-22s %s\n", e.Type, e.Reason, e.Message)
	}
	return nil
}

// endpoints lists the ready TCP endpoints (ip:port) of Service name's EndpointSlices.
func (d *demo) endpoints(name string) ([]string, error) {
	list, err := d.cs.DiscoveryV1().EndpointSlices("demo").List(d.ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, s := range list.Items {
		port := int32(0)
		for _, p := range s.Ports {
			if ptr.Deref(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP && p.Port != nil {
				port = *p.Port
			}
		}
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				for _, a := range e.Addresses {
					eps = append(eps, fmt.Sprintf("%s:%d", a, port))
				}
			}
		}
	}
	slices.Sort(eps)
	return eps, nil
}

// traffic routes demo/web's VIP from the client to node1 and sends TCP requests to it.
func (d *demo) traffic() (netip.Addr, error) {
	ctx := d.ctx
	svc, err := d.cs.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	vip, err := netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	if err != nil {
		return netip.Addr{}, err
	}
	if !netip.MustParsePrefix(pool).Contains(vip) {
		return netip.Addr{}, fmt.Errorf("demo/web got %s, outside the pool %s", vip, pool)
	}
	// Both pods must be endpoints before the requests, or the first ones see only one of them.
	if err := waitFor(ctx, func() bool {
		eps, err := d.endpoints("web")
		return err == nil && len(eps) == len(d.lab.Nodes())
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("demo/web's EndpointSlices never listed both pods: %w", err)
	}

	client, node1 := d.lab.Clients()[0], d.lab.Nodes()[0]
	step(fmt.Sprintf("Routing %s from %s via %s (%s)", vip, client.Name, node1.Name, node1.Addr))
	fmt.Printf("$ ip netns exec %s ip route replace %s/32 via %s\n", client.NS, vip, node1.Addr)
	fmt.Println("This route, in client1's namespace only, stands in for the router, or for the bare-metal")
	fmt.Println("announcer (ARP/BGP) that will draw VIP traffic to a node: a later Portico feature.")
	if _, err := client.Exec(ctx, "ip", "route", "replace", vip.String()+"/32", "via", node1.Addr.String()); err != nil {
		return netip.Addr{}, err
	}

	dst := netip.AddrPortFrom(vip, 80)
	step(fmt.Sprintf("Sending %d TCP requests from %s (%s) to %s; portico-agent on %s forwards them", requests, client.Name, client.Addr, dst, node1.Name))
	// The agents program the VIP within a sync or two of the controller setting it.
	if err := waitFor(ctx, func() bool {
		_, err := request(ctx, client, dst)
		return err == nil
	}); err != nil {
		last := ""
		if _, rerr := request(ctx, client, dst); rerr != nil {
			last = rerr.Error()
		}
		return netip.Addr{}, fmt.Errorf("%s never answered: %s", dst, last)
	}
	podNode := map[string]string{}
	for _, n := range d.lab.Nodes() {
		for _, p := range n.Pods() {
			podNode[p.Name] = fmt.Sprintf("%s on %s", p.Addr, n.Name)
		}
	}
	count := map[string]int{}
	seen := map[netip.Addr]bool{}
	for i := 1; i <= requests; i++ {
		r, err := request(ctx, client, dst)
		if err != nil {
			return netip.Addr{}, err
		}
		count[r.Server]++
		seen[r.Client.Addr()] = true
		fmt.Printf("  #%-2d answered by pod %-13s (%s); it saw the client as %s\n", i, r.Server, podNode[r.Server], r.Client)
	}
	var tally []string
	for _, n := range d.lab.Nodes() {
		name := "web-" + n.Name
		tally = append(tally, fmt.Sprintf("%s %d", name, count[name]))
	}
	fmt.Printf("Answers: %s.\n", strings.Join(tally, ", "))
	if len(seen) == 1 && seen[node1.Addr] {
		fmt.Printf("The pods saw %s's address (%s), not %s's (%s): with externalTrafficPolicy Cluster\n", node1.Name, node1.Addr, client.Name, client.Addr)
		fmt.Printf("the agent masquerades VIP traffic, so that replies, also %s's, return through %s.\n", d.lab.Nodes()[1].Name, node1.Name)
	}
	return vip, nil
}

// vipGone waits until the agents removed demo/web's rules: the VIP stops answering.
func (d *demo) vipGone(vip netip.Addr) error {
	client := d.lab.Clients()[0]
	dst := netip.AddrPortFrom(vip, 80)
	var last error
	if err := waitFor(d.ctx, func() bool {
		_, last = request(d.ctx, client, dst)
		return last != nil
	}); err != nil {
		return fmt.Errorf("%s still answers after demo/web was deleted: %w", dst, err)
	}
	fmt.Printf("%s from %s no longer reaches a pod (the agents removed its rules): %v\n", dst, client.Name, trimErr(last))
	return nil
}

// request sends one TCP request with a short timeout.
func request(ctx context.Context, from *netlab.Host, dst netip.AddrPort) (netlab.Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return from.Request(ctx, "tcp", dst)
}

// trimErr keeps the last part of a wrapped network error ("connect: no route to host").
func trimErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": dial tcp "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

func waitFor(ctx context.Context, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }
