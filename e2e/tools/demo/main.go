// Command demo shows Portico at work on a real, local control plane and, when it can, with real
// packets.
//
// It starts a network lab (e2e/framework/netlab: two node namespaces, a client namespace and a router
// namespace on one LAN, addresses from 198.19.0.0/16) and etcd, kube-apiserver and
// kube-controller-manager (e2e/framework/cluster) listening on the lab's root address, installs Portico's
// CRDs, runs bird2 in the router namespace (e2e/framework/router: one eBGP session per node with BFD
// 100 ms x 3, learned routes installed in the router's kernel with every next hop) with a
// second client, "outside", behind the router, and creates the BGPPeer "router". It registers
// the two lab nodes and runs portico-agent in each node namespace with layer-2 and BGP
// announcement (--announce=l2,bgp --membership). It runs the portico-controller binary with the
// baremetal provider and an AddressPool of eight addresses on the LAN itself (.200-.207)
// announced by ARP and by BGP, adds an echo-server pod on each node and creates LoadBalancer
// Services: demo/web selecting the two pods, one of another class and one with a bad
// annotation, and prints what `kubectl describe service` would show for each. The LAN client
// then sends TCP requests to demo/web's VIP: it resolves the VIP by ARP like any address on its
// LAN, no route involved; the demo prints `kubectl get svc` with the EXTERNAL-IP and the node
// that announces it, which pod answered and the client address the pod saw. The outside client
// reaches the same VIP only through the router: the demo prints the router's route for it
// (`birdc show route`, with both nodes as next hops, and the kernel's ECMP route) and the
// outside client's requests with the node the router sent each one to. It then kills the ARP
// announcer's agent: the other node announces the VIP within a second and the LAN client is
// still served; the killed agent's BGP session ended with it, so the router's route keeps one
// next hop and the outside client is served too. Finally it deletes demo/web, shows the
// finalizer releasing it, the VIP going dark and its route withdrawn.
//
// Without bird2 (Debian package bird2, which `make prereqs` installs) the demo says so and
// skips the router and the BGP part. Without root, the ip command or iptables-restore the lab
// cannot run (nor when a route of this machine overlaps the lab's addresses): the demo says why
// and runs the controller part alone on a loopback control plane (pool 198.18.128.0/28,
// nothing announced). Everything it starts (processes, namespaces, the lab's root link,
// temporary files) is removed on exit, also on Ctrl-C or error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/router"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

const (
	class = "portico-lb.io/demo"
	// loopbackPool is the AddressPool without a lab, inside cluster.LBPoolCIDR
	// (198.18.128.0/17); with a lab the pool is on the LAN (poolOf).
	loopbackPool = "198.18.128.0/28"
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
	provider := flag.String("provider", "baremetal", "walk-through: baremetal (network lab; without root the controller alone), aws (moto's AWS emulator, aws.go) or cluster (helm install on real kubelets, cluster.go)")
	flag.Parse()
	walks := map[string]func(context.Context) error{"baremetal": run, "aws": runAWS, "cluster": runCluster}
	if walks[*provider] == nil {
		log.Fatalf("demo: -provider=%q: want baremetal, aws or cluster", *provider)
	}
	start := time.Now()
	err := walks[*provider](ctx)
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
	pool  string            // the AddressPool's addresses
	// announcer is the node the client found announcing demo/web's VIP.
	announcer string
	// agents are the portico-agent processes by node name.
	agents map[string]*netlab.Process
	// bird is the router (nil without bird2: no BGP part) and outside the client behind it.
	bird    *router.Bird
	outside *router.Outside
	// noRouter says why the BGP part does not run, or is nil.
	noRouter error
}

func run(ctx context.Context) (err error) {
	d := &demo{ctx: ctx, bins: map[string]string{}, pool: loopbackPool, agents: map[string]*netlab.Process{}}
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
		step("Starting a network lab: node1, node2, client1 and a router on one LAN, plus a link to this namespace")
		lab, err := netlab.NewE(netlab.Options{Nodes: 2, Clients: 1, Router: true, RootLink: true})
		switch {
		case errors.Is(err, netlab.ErrRootRouteOverlap):
			// Nothing was added; the controller part still runs.
			withLab = false
			fmt.Printf("No network lab: %v\nRunning the controller part only (no agent, no packets).\n", err)
		case err != nil:
			return err
		default:
			d.lab = lab
			d.pool = poolOf(lab.LANPrefix())
			defer func() {
				if cerr := lab.Close(); cerr != nil {
					err = errors.Join(err, cerr)
				}
			}()
			d.printLab()
			if d.noRouter = routerUnsupported(); d.noRouter != nil {
				fmt.Printf("No BGP router: %v; the demo runs without its BGP part.\n", d.noRouter)
			}
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
	if err := c.InstallCRDs(ctx, filepath.Join("deploy", "crds")); err != nil {
		return err
	}
	if err := d.addressPool(); err != nil {
		return err
	}

	step("Starting portico-controller (provider: baremetal, class " + class + ")")
	stopCtl, err := d.startController()
	if err != nil {
		return err
	}
	defer stopCtl()

	if err := c.EnsureNamespace(ctx, "demo"); err != nil {
		return err
	}
	if d.lab != nil && d.noRouter == nil {
		if err := d.startRouter(); err != nil {
			return err
		}
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
		if d.bird != nil {
			if err := d.routed(vip); err != nil {
				return err
			}
		}
		if err := d.failover(vip); err != nil {
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
		if d.bird != nil {
			if err := d.routeGone(vip); err != nil {
				return err
			}
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

// build finds the named binaries (packages under ./cmd, or e2e/tools/echoserver) in the cache
// of e2e/framework/gobuild, building those whose source changed.
func (d *demo) build(names ...string) error {
	for _, name := range names {
		pkg := "cmd/" + name
		if name == "echoserver" {
			pkg = "e2e/tools/echoserver"
		}
		bin, err := gobuild.Binary(d.ctx, pkg)
		if err != nil {
			return err
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
	fmt.Printf("  %-8s %s\n", l.Router().Name, l.Router().Addr)
}

// startController runs portico-controller and returns the function that stops it.
func (d *demo) startController() (func(), error) {
	d.ctlog = filepath.Join(d.dir, "portico-controller.log")
	args := []string{"--kubeconfig=" + d.c.KubeconfigPath(), "--class=" + class + "=baremetal",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	return startProcess(d.bins["portico-controller"], args, nil, d.ctlog)
}

// macs maps the nodes' eth0 MAC addresses to their names, filled by startNodes.
var macs = map[string]string{}

// startNodes registers the lab's nodes and starts portico-agent in each node namespace. The
// agents are lab processes: lab.Close kills them at the latest.
func (d *demo) startNodes() error {
	var cidrs []string
	for _, n := range d.lab.Nodes() {
		cidrs = append(cidrs, n.PodCIDR.String())
		if err := n.Do(func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err == nil {
				macs[ifi.HardwareAddr.String()] = n.Name
			}
			return err
		}); err != nil {
			return err
		}
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
	announce := "l2"
	if d.bird != nil {
		announce = "l2,bgp"
	}
	step("Registering the lab nodes; starting portico-agent in each node's namespace (--announce=" + announce + " --membership)")
	for _, n := range d.lab.Nodes() {
		p, err := n.Start(d.bins["portico-agent"],
			"--kubeconfig="+kubeconfig,
			"--hostname-override="+n.Name,
			"--cluster-cidr="+strings.Join(cidrs, ","),
			"--iptables-min-sync-period=200ms",
			"--metrics-bind-address=0",
			"--announce="+announce, "--membership", "--membership-rejoin-interval=1s",
			"--announce-classes="+class, "--announce-classless=false", // the controller's --class
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
		d.agents[n.Name] = p
		fmt.Printf("  Node %s: InternalIP %s, PodCIDR %s; portico-agent (pid %d) joined its peers and wrote its first iptables rules\n",
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
	svc := services.LoadBalancer("demo", name, func(s *corev1.Service) {
		s.Annotations, s.Spec.LoadBalancerClass = ann, cls
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		}
	})
	_, err := d.cs.CoreV1().Services("demo").Create(d.ctx, svc, metav1.CreateOptions{})
	return err
}

// describe prints the parts of `kubectl describe service` that Portico writes (the address,
// the endpoints, the Events, as kubectl lays them out), then what kubectl describe does not
// show: the class, the finalizers and the condition, as `kubectl get -o jsonpath` prints them.
func (d *demo) describe(name string) error {
	s, err := d.cs.CoreV1().Services("demo").Get(d.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("\n$ kubectl describe service -n demo %s   (abridged)\n", name)
	fmt.Printf("Name:                     %s\n", s.Name)
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
	evs, err := d.cs.CoreV1().Events("demo").List(d.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	fmt.Println("Events:")
	if len(evs.Items) == 0 {
		fmt.Println("  <none>")
	} else {
		fmt.Printf("  %-8s %-22s %-20s %s\n", "Type", "Reason", "From", "Message")
		fmt.Printf("  %-8s %-22s %-20s %s\n", "----", "------", "----", "-------")
	}
	for _, e := range evs.Items {
		from := e.ReportingController
		if from == "" {
			from = e.Source.Component
		}
		fmt.Printf("  %-8s %-22s %-20s %s\n", e.Type, e.Reason, from, e.Message)
	}
	fmt.Printf("\n$ kubectl get service -n demo %s -o jsonpath='{.spec.loadBalancerClass} {.metadata.finalizers}{\"\\n\"}{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}'\n", name)
	fmt.Printf("%s %s\n", ptr.Deref(s.Spec.LoadBalancerClass, ""), "[\""+strings.Join(s.Finalizers, "\",\"")+"\"]")
	for _, cond := range s.Status.Conditions {
		fmt.Printf("%s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
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
	if !inPool(d.pool, vip) {
		return netip.Addr{}, fmt.Errorf("demo/web got %s, outside the pool %s", vip, d.pool)
	}
	// Both pods must be endpoints before the requests, or the first ones see only one of them.
	if err := waitFor(ctx, func() bool {
		eps, err := d.endpoints("web")
		return err == nil && len(eps) == len(d.lab.Nodes())
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("demo/web's EndpointSlices never listed both pods: %w", err)
	}

	client := d.lab.Clients()[0]
	dst := netip.AddrPortFrom(vip, 80)
	step(fmt.Sprintf("Sending TCP requests from %s (%s) to %s: %s is on its LAN, so it asks by ARP who has it", client.Name, client.Addr, dst, vip))
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
	announcer, err := d.getSvc(vip)
	if err != nil {
		return netip.Addr{}, err
	}
	d.announcer = announcer
	node1 := d.node(announcer)
	if err := d.send(client, dst, node1); err != nil {
		return netip.Addr{}, err
	}
	return vip, nil
}

// node returns the lab node named name.
func (d *demo) node(name string) *netlab.Node {
	for _, n := range d.lab.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return d.lab.Nodes()[0]
}

// send sends the requests and tallies which pod answered; via is the announcing node.
func (d *demo) send(client *netlab.Host, dst netip.AddrPort, via *netlab.Node) error {
	ctx := d.ctx
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
			return err
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
	if len(seen) == 1 && seen[via.Addr] {
		fmt.Printf("The pods saw %s's address (%s), not %s's (%s): with externalTrafficPolicy Cluster\n", via.Name, via.Addr, client.Name, client.Addr)
		fmt.Printf("the agent masquerades VIP traffic, so that replies from every pod return through %s.\n", via.Name)
	}
	return nil
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

// waitFor waits up to a minute for cond.
func waitFor(ctx context.Context, cond func() bool) error {
	return wait.Poll(ctx, 200*time.Millisecond, 60*time.Second, "the demo's condition", func(context.Context) error { return wait.True(cond)() })
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

// poolOf is the demo's AddressPool on the lab's LAN: .200-.207, addresses no lab host uses.
func poolOf(lan netip.Prefix) string {
	b := lan.Addr().As4()
	return fmt.Sprintf("%d.%d.%d.200-%d.%d.%d.207", b[0], b[1], b[2], b[0], b[1], b[2])
}

// inPool reports whether vip is in pool (a CIDR or an "a-b" range).
func inPool(pool string, vip netip.Addr) bool {
	if p, err := netip.ParsePrefix(pool); err == nil {
		return p.Contains(vip)
	}
	first, last, _ := strings.Cut(pool, "-")
	a, err1 := netip.ParseAddr(first)
	b, err2 := netip.ParseAddr(last)
	return err1 == nil && err2 == nil && a.Compare(vip) <= 0 && vip.Compare(b) <= 0
}

// addressPool creates the AddressPool "lan", announced by ARP from any node and, with the
// router, by BGP to every BGPPeer.
func (d *demo) addressPool() error {
	ap := &v1alpha1.AddressPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AddressPool"},
		ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec:       v1alpha1.AddressPoolSpec{Addresses: []string{d.pool}, Announce: v1alpha1.Announce{L2: &v1alpha1.L2Announce{}}},
	}
	how := "spec.announce.l2: any node, the interface on the VIP's subnet"
	if d.lab != nil && d.noRouter == nil {
		ap.Spec.Announce.BGP = &v1alpha1.BGPAnnounce{}
		how += "; spec.announce.bgp: every node, to every BGPPeer"
	}
	step("Creating AddressPool lan (" + d.pool + ", " + how + ")")
	return d.createObject("addresspools", ap)
}

// createObject creates a Portico object (obj has its TypeMeta) of the resource.
func (d *demo) createObject(resource string, obj any) error {
	dyn, err := dynamic.NewForConfig(d.c.Config())
	if err != nil {
		return err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(v1alpha1.GroupVersion.WithResource(resource)).Create(d.ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	return err
}

// getSvc prints `kubectl get svc` for demo/web, the node the client's neighbour table says
// answers for vip, and the agent's Event; it returns that node.
func (d *demo) getSvc(vip netip.Addr) (string, error) {
	s, err := d.cs.CoreV1().Services("demo").Get(d.ctx, "web", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var ports []string
	for _, p := range s.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
	}
	fmt.Println("\n$ kubectl get svc -n demo web")
	fmt.Printf("%-5s %-13s %-15s %-15s %s\n", "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)")
	fmt.Printf("%-5s %-13s %-15s %-15s %s\n", s.Name, s.Spec.Type, s.Spec.ClusterIP, vip, strings.Join(ports, ","))
	client := d.lab.Clients()[0]
	out, err := client.Exec(d.ctx, "ip", "neigh", "show", vip.String())
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(out))
	node := ""
	for _, f := range strings.Fields(line) {
		if n, ok := macs[strings.ToLower(f)]; ok {
			node = n
		}
	}
	if node == "" {
		return "", fmt.Errorf("%s's neighbour entry for %s names no node: %q", client.Name, vip, line)
	}
	fmt.Printf("\n$ ip netns exec %s ip neigh show %s\n%s\n", client.NS, vip, line)
	fmt.Printf("%s is announced by %s: its MAC answered %s's ARP request.\n", vip, node, client.Name)
	evs, err := d.cs.CoreV1().Events("demo").List(d.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=L2Announcing"})
	if err == nil {
		for _, e := range evs.Items {
			fmt.Printf("  Event %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	return node, nil
}

// failover kills the announcing node's agent and shows the other node taking the VIP over while
// the client keeps being served.
func (d *demo) failover(vip netip.Addr) error {
	client := d.lab.Clients()[0]
	dst := netip.AddrPortFrom(vip, 80)
	before := d.announcer
	step(fmt.Sprintf("Killing portico-agent on %s (SIGKILL), the node announcing %s", before, vip))
	start := time.Now()
	if err := d.agents[before].Stop(); err != nil {
		return err
	}
	var after string
	failed := 0
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := request(d.ctx, client, dst); err != nil {
			failed++
		}
		out, _ := client.Exec(d.ctx, "ip", "neigh", "show", vip.String())
		for _, f := range strings.Fields(string(out)) {
			if n, ok := macs[strings.ToLower(f)]; ok && n != before {
				after = n
			}
		}
		if after != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after == "" {
		return fmt.Errorf("no other node announced %s within 10 s", vip)
	}
	fmt.Printf("%s announced %s %s after the kill (gratuitous ARP; membership saw %s's agent die);\n", after, vip,
		time.Since(start).Round(10*time.Millisecond), before)
	fmt.Printf("%d requests failed meanwhile (%s's node still forwards with the rules it had).\n", failed, before)
	if _, err := d.getSvc(vip); err != nil {
		return err
	}
	step(fmt.Sprintf("Sending %d TCP requests again: %s forwards them now", requests, after))
	if err := d.send(client, dst, d.node(after)); err != nil {
		return err
	}
	fmt.Printf("While membership reports %s dead, the agents leave its endpoints out of their rules (unless no\n", before)
	fmt.Println("other endpoint is ready): Kubernetes would keep listing them for 40 s or more after a node is lost.")
	if d.bird != nil {
		return d.routedFailover(vip, before)
	}
	return nil
}
