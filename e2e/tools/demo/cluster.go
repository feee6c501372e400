package main

// The install story on a cluster of real kubelets (-provider=cluster, `make demo DEMO=cluster`):
// a control plane and three kubelet nodes with containerd and CoreDNS and no kube-proxy
// (e2e/framework/nodes), a user's echo Deployment behind a LoadBalancer Service that stays
// pending, then Portico installed as a user does (e2e/framework/install: the images imported on
// every node, `helm install` of deploy/chart/portico with Helm's Go packages): the agents
// program every node (CoreDNS answers through the kube-dns ClusterIP), the controller gives
// the Service an address from an AddressPool, a client on the nodes' LAN reaches it (L2);
// `helm upgrade` to new images under traffic; deleting the Service and `helm uninstall` leave
// no rules on any node. Everything is removed on exit, also on Ctrl-C or error.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/traffic"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// clusterPool is the AddressPool of the cluster walk-through, inside cluster.LBPoolCIDR; the
// LAN client gets an on-link route for clusterOnLink and resolves the VIPs by ARP.
const (
	clusterPool   = "198.18.221.0/28"
	clusterOnLink = "198.18.221.0/24"
)

func runCluster(ctx context.Context) (err error) {
	if err := nodes.Supported(); err != nil {
		return fmt.Errorf("the cluster walk-through needs root and the kubelet nodes' packages: %w", err)
	}
	step("Starting a cluster of real kubelets: control plane, 3 nodes (containerd, kubelet), CoreDNS; no kube-proxy")
	c, err := nodes.Start(ctx, nodes.Options{Nodes: 3, DNS: true, Clients: 1})
	if c != nil {
		defer func() {
			step("Removing the cluster")
			if cerr := c.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Printf("3 nodes Ready in %s; the API server at %s; nodes %s, %s, %s on the LAN %s\n", c.Started.Round(100*time.Millisecond),
		c.ControlPlane.Host(), c.Nodes[0].Lab.Addr, c.Nodes[1].Lab.Addr, c.Nodes[2].Lab.Addr, c.Lab.LANPrefix())
	cs := c.Client()
	client := c.Lab.Clients()[0]
	if _, err := client.Exec(ctx, "ip", "route", "add", clusterOnLink, "dev", "eth0"); err != nil {
		return err
	}

	step("A user's workload before Portico: 3 echo pods and a LoadBalancer Service (class " + install.DefaultClass + ")")
	if err := wait.Poll(ctx, 200*time.Millisecond, time.Minute, "the default ServiceAccount", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, demoEcho(c.EchoImage), metav1.CreateOptions{}); err != nil {
		return err
	}
	class := install.DefaultClass
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "tcp", Port: echoPort, TargetPort: intstr.FromInt32(echoPort)}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Println("NAME  TYPE          EXTERNAL-IP  (pending: no load-balancer controller, and no service proxy: ClusterIPs lead nowhere)")

	tag, err := install.DefaultTag(ctx)
	if err != nil {
		return err
	}
	step("Building Portico's images (tag " + tag + "; cached once built)")
	begin := time.Now()
	if _, err := install.BuildImages(ctx, tag, func(string, ...any) {}); err != nil {
		return err
	}
	fmt.Printf("built or found in %s\n", time.Since(begin).Round(100*time.Millisecond))
	opts := install.Options{Tag: tag, Pool: netip.MustParsePrefix(clusterPool)}
	step("helm install portico deploy/chart/portico -n kube-system (Helm's Go packages), with:")
	fmt.Printf("  agent.apiServer=%s  (the agent is the service proxy: it must not need the ClusterIP it programs)\n", c.ControlPlane.Host())
	fmt.Printf("  controller.classes={%q: baremetal}  addressPools=[lan: %s, announce l2]  image.tag=%s\n", install.DefaultClass, clusterPool, tag)
	begin = time.Now()
	r, err := install.Portico(ctx, c, opts)
	if r != nil {
		defer func() {
			if uerr := r.Uninstall(context.Background()); uerr != nil && err == nil {
				err = uerr
			}
		}()
	}
	if err != nil {
		return err
	}
	fmt.Printf("images imported on 3 nodes, agents Ready on every node, controller available: %s\n", time.Since(begin).Round(100*time.Millisecond))

	var vip netip.Addr
	if err := wait.Poll(ctx, 200*time.Millisecond, 2*time.Minute, "an ingress IP for default/web", func(ctx context.Context) error {
		s, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		vip, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err
	}); err != nil {
		return err
	}
	target := netip.AddrPortFrom(vip, echoPort)
	var first netlab.Reply
	if err := wait.Poll(ctx, 100*time.Millisecond, 2*time.Minute, "the LAN client served through "+target.String(), func(ctx context.Context) error {
		var err error
		first, err = request(ctx, client, target)
		return err
	}); err != nil {
		return err
	}
	step(fmt.Sprintf("The controller gave default/web %s from the pool; the LAN client (%s) is served %s after helm install", vip, client.Addr, time.Since(begin).Round(100*time.Millisecond)))
	fmt.Printf("NAME  TYPE          EXTERNAL-IP\nweb   LoadBalancer  %s\n", vip)
	fmt.Printf("client -> %s: answered by %s, which saw %s\n", target, first.Server, first.Client.Addr())
	for range 5 {
		rep, err := request(ctx, client, target)
		if err != nil {
			return err
		}
		fmt.Printf("client -> %s: answered by %s, which saw %s\n", target, rep.Server, rep.Client.Addr())
	}

	step("ClusterIPs work without kube-proxy: node1 asks CoreDNS through the kube-dns ClusterIP " + nodes.DNSServiceIP.String())
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return c.Nodes[0].Lab.DialUDP(ctx, netip.AddrPortFrom(nodes.DNSServiceIP, 53))
	}}
	name := "web.default.svc." + nodes.DNSDomain
	addrs, err := resolver.LookupHost(ctx, name)
	if err != nil {
		return fmt.Errorf("resolving %s through the kube-dns ClusterIP: %w", name, err)
	}
	fmt.Printf("%s -> %s\n", name, strings.Join(addrs, ", "))

	next := tag + "-next"
	step("helm upgrade to new images (" + next + ") while the client keeps sending requests on new connections")
	// The images go onto the nodes first, as a registry pull would bring them to each node on
	// its own: importing them into three nodes' containerds at once is the lab's burst, not a
	// rollout's (e2e/framework/install.Release.Stage).
	if err := r.Stage(ctx, next); err != nil {
		return err
	}
	load := traffic.Run(client, target, traffic.Options{})
	begin = time.Now()
	uerr := r.Upgrade(ctx, next, nil)
	res := load.Stop()
	if uerr != nil {
		return uerr
	}
	fmt.Printf("every agent and controller replaced and Ready in %s; %d requests served meanwhile (the slowest in %s), %d failed\n", time.Since(begin).Round(100*time.Millisecond), res.NewRequests-res.FailedNew, res.SlowestNew.Round(time.Millisecond), res.FailedNew)
	if res.FailedNew > 0 {
		for _, f := range res.Failed {
			fmt.Println("  failed:", f)
		}
		return fmt.Errorf("%d requests failed during the upgrade", res.FailedNew)
	}
	s, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("the VIP after the upgrade: %s\n", s.Status.LoadBalancer.Ingress[0].IP)

	step("Deleting default/web, then helm uninstall --wait --cascade foreground (each agent, seeing its DaemonSet deleted, removes its rules as it stops)")
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := wait.Poll(ctx, 200*time.Millisecond, time.Minute, "default/web deleted (the finalizer releases the VIP)", func(ctx context.Context) error {
		_, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	}); err != nil {
		return err
	}
	begin = time.Now()
	if err := r.Uninstall(ctx); err != nil {
		return err
	}
	if err := r.Gone(ctx); err != nil {
		return err
	}
	fmt.Printf("uninstalled in %s\n", time.Since(begin).Round(100*time.Millisecond))
	for _, n := range c.Nodes {
		out, err := n.Lab.Exec(ctx, "iptables-save")
		if err != nil {
			return err
		}
		chains := strings.Count(string(out), ":"+rules.Prefix)
		fmt.Printf("%s: %d %s chains left\n", n.Name, chains, rules.Prefix)
		if chains > 0 {
			return fmt.Errorf("%s kept %d of the agent's chains after uninstall", n.Name, chains)
		}
	}
	return nil
}

// demoLoad sends requests on new connections from client to target until the returned stop
// is called; stop returns the requests served and failed.
func demoEcho(image string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "echo", Image: image, ImagePullPolicy: corev1.PullNever,
						Args:  []string{"-tcp", fmt.Sprint(echoPort)},
						Ports: []corev1.ContainerPort{{ContainerPort: echoPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(echoPort)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}
