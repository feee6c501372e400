package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/exec"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestCluster: three kubelet nodes come up Ready, echo pods run as real containers on every
// node and answer the other nodes by pod IP, exec and logs work, and Close leaves nothing.
func TestCluster(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 3, DNS: true})
	cs := c.Client()
	ctx := t.Context()
	t.Logf("cluster of %d nodes started in %s", len(c.Nodes), c.Started.Round(time.Millisecond))

	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ready []string
	for i := range list.Items {
		if nodes.NodeReady(&list.Items[i]) {
			ready = append(ready, list.Items[i].Name)
		}
	}
	if slices.Sort(ready); !slices.Equal(ready, []string{"node1", "node2", "node3"}) {
		t.Fatalf("Ready nodes %v, want node1..node3", ready)
	}

	// Pods need the namespace's ServiceAccount and root CA ConfigMap (its projected token
	// volume); kube-controller-manager makes both. Wait for them so that the measured
	// create-to-Ready time is the node's.
	wait.For(t, time.Minute, "the default ServiceAccount and kube-root-ca.crt", func() error {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})

	created := time.Now()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, c.EchoDeployment(3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyAt := map[string]time.Duration{}
	var pods []corev1.Pod
	wait.For(t, 2*time.Minute, "3 echo pods Ready, one per node", func() error {
		pl, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		for _, p := range pl.Items {
			if _, seen := readyAt[p.Name]; !seen && nodes.PodReady(&p) {
				readyAt[p.Name] = time.Since(created)
			}
		}
		pods = pl.Items
		return checkSpread(pl.Items)
	}, func() string { return describePods(ctx, c, pods) })
	allReady := time.Since(created)
	var times []string
	for name, d := range readyAt {
		times = append(times, fmt.Sprintf("%s %s", name, d.Round(time.Millisecond)))
	}
	slices.Sort(times)
	t.Logf("Deployment created to all 3 pods Ready (as polled every 200ms): %s; per pod: %s", allReady.Round(time.Millisecond), strings.Join(times, ", "))

	// Every pod answers from another node by its pod IP, and sees that node's address (no NAT):
	// the pod's container really runs, with its own hostname, behind the lab's pod routes.
	for i, p := range pods {
		from := c.Nodes[(nodeIndex(t, c, p.Spec.NodeName)+1)%len(c.Nodes)]
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !c.Node(p.Spec.NodeName).Lab.PodCIDR.Contains(ip) {
			t.Errorf("pod %s on %s has IP %s outside the node's pod CIDR %s", p.Name, p.Spec.NodeName, ip, c.Node(p.Spec.NodeName).Lab.PodCIDR)
		}
		reply, err := from.Lab.Request(ctx, "tcp", netip.AddrPortFrom(ip, nodes.EchoPort))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if reply.Server != p.Name || reply.Client.Addr() != from.Lab.Addr {
			t.Errorf("%s asked pod %s (%s on %s): reply from %q seeing client %s, want %q seeing %s",
				from.Name, p.Name, ip, p.Spec.NodeName, reply.Server, reply.Client, p.Name, from.Lab.Addr)
		}
	}

	// CoreDNS (a pod reaching the apiserver through the root routes) serves the cluster's
	// names; asked here at its pod IP, as no service proxy runs yet.
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Port: nodes.EchoPort, TargetPort: intstr.FromInt32(nodes.EchoPort)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubernetesSvc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dnsPod, err := c.DNSPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := c.Nodes[0]
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if strings.HasPrefix(network, "tcp") {
			return from.Lab.DialTCP(ctx, netip.AddrPortFrom(dnsPod, 53))
		}
		return from.Lab.DialUDP(ctx, netip.AddrPortFrom(dnsPod, 53))
	}}
	for name, want := range map[string]string{
		"echo.default.svc." + nodes.DNSDomain + ".":         svc.Spec.ClusterIP,
		"kubernetes.default.svc." + nodes.DNSDomain + ".":   kubernetesSvc.Spec.ClusterIP,
		"kube-dns.kube-system.svc." + nodes.DNSDomain + ".": nodes.DNSServiceIP.String(),
	} {
		var got []string
		wait.For(t, 30*time.Second, "CoreDNS to answer "+name, func() error {
			got, err = resolver.LookupHost(ctx, name)
			return err
		})
		if !slices.Equal(got, []string{want}) {
			t.Errorf("CoreDNS at %s answers %s with %v, want [%s]", dnsPod, name, got, want)
		}
	}

	// Logs and exec go from the apiserver to the kubelet (its client certificate) and on to
	// containerd's stream server inside the node.
	pod := pods[0]
	logs, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pod.Name, err)
	}
	if !strings.Contains(string(logs), "ready") {
		t.Errorf("logs of %s = %q, want the echo server's \"ready\"", pod.Name, logs)
	}
	// exec in a pod on one node dials a pod on another: pod to pod across nodes, by pod IP,
	// the client's pod IP kept.
	target := pods[1]
	stdout, stderr, err := c.Exec(ctx, pod, "/echoserver", "-dial", netip.AddrPortFrom(netip.MustParseAddr(target.Status.PodIP), nodes.EchoPort).String())
	if err != nil {
		t.Fatalf("exec /echoserver -dial in %s: %v (stderr %q)", pod.Name, err, stderr)
	}
	reply, err := netlab.ParseReply(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Server != target.Name || reply.Client.Addr().String() != pod.Status.PodIP {
		t.Errorf("pod %s (%s on %s) dialled pod %s (%s on %s): reply from %q seeing client %s, want %q seeing %s",
			pod.Name, pod.Status.PodIP, pod.Spec.NodeName, target.Name, target.Status.PodIP, target.Spec.NodeName,
			reply.Server, reply.Client, target.Name, pod.Status.PodIP)
	}
	// A failing command's exit status comes back through the stream.
	_, stderr, err = c.Exec(ctx, pod, "/echoserver")
	var exitErr exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 1 || !strings.Contains(stderr, "no ports") {
		t.Errorf("exec /echoserver (no ports) in %s: err %v, stderr %q; want exit status 1 and \"no ports\"", pod.Name, err, stderr)
	}

	rss, err := c.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resident memory of the whole cluster (control plane, 3 nodes, CoreDNS, 3 echo pods): %d MiB", rss>>20)

	labID := c.Lab.ID()
	stopped := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("closing the cluster: %v", err)
	}
	t.Logf("teardown took %s", time.Since(stopped).Round(time.Millisecond))
	left, err := nodes.Leftovers(c.Dir, labID)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("Close left behind:\n%s", strings.Join(left, "\n"))
	}
}

// checkSpread wants exactly three Ready pods with IPs, on three different nodes.
func checkSpread(pods []corev1.Pod) error {
	on := map[string]string{}
	for _, p := range pods {
		if !nodes.PodReady(&p) || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s on %q: phase %s, not Ready", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		if other, ok := on[p.Spec.NodeName]; ok {
			return fmt.Errorf("pods %s and %s both on %s", other, p.Name, p.Spec.NodeName)
		}
		on[p.Spec.NodeName] = p.Name
	}
	if len(on) != 3 {
		return fmt.Errorf("%d Ready pods, want 3", len(on))
	}
	return nil
}

func nodeIndex(t *testing.T, c *nodes.Cluster, name string) int {
	t.Helper()
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	t.Fatalf("no node %q", name)
	return -1
}

// describePods is the failure dump: the pods' states, their Events and the nodes' log tails.
func describePods(ctx context.Context, c *nodes.Cluster, pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "pod %s node %q phase %s conditions %+v statuses %+v\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	}
	if ev, err := c.Client().CoreV1().Events("default").List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range ev.Items {
			fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	for _, n := range c.Nodes {
		b.WriteString(n.LogTails())
	}
	return b.String()
}
