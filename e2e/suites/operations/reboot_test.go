package operations

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// rebootServicePort is the echo Service's port (ClusterIP); its pods serve nodes.EchoPort.
const rebootServicePort = 80

// TestRebootWithoutKubeProxy (issue 31, item 7): on a cluster of real kubelets without
// kube-proxy, where portico-agent is the only service proxy, a node reboots (its kubelet,
// containerd, the agent and every container killed, its netfilter ruleset and conntrack
// flushed, /run and containerd's state cleared; nodes.Cluster.Reboot) and serves Services
// again: a request from inside the node to the echo Service's ClusterIP, and from a client on
// the LAN to the node's NodePort, answered by the echo pod on the other node; the node's agent
// is Ready again in a new container. The agent reaches the API server at its own address
// (agent.apiServer), which the chart now requires: the install with the chart's default
// (agent.apiServer "") is refused, naming the value. Measured (three runs, load average about
// 10): served again 3.2-3.4 s after the node's processes started, the agent Ready 3.3-3.7 s.
//
// On d6507e1 the chart installed with agent.apiServer "" (the agent then reached the API
// server through the kubernetes ClusterIP, which only its own rules lead anywhere), and this
// test fails at its first step: "helm install with agent.apiServer "" was not refused" (the
// agents crash-looped, no rule leading to the ClusterIP). Run there with the install done with
// the address and then upgraded to "" (the agents' rules already in place, as after removing
// kube-proxy), the rebooted node's agent crash-looped ("dial tcp 198.18.0.1:443: i/o timeout")
// and the node served nothing for the 3 minutes waited.
func TestRebootWithoutKubeProxy(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 2, Clients: 1})
	ctx := t.Context()
	cs := c.Client()
	rebooted, other := c.Nodes[0], c.Nodes[1]
	client := c.Lab.Clients()[0]

	tag, err := install.DefaultTag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	if _, err := install.BuildImages(ctx, tag, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("images %s built or found in %s", tag, time.Since(built).Round(time.Millisecond))

	// The chart's default: refused, naming the value, before anything is installed.
	rebootRefusedWithoutAPIServer(t, c, tag)

	svc := rebootEchoService(t, c, other.Name)
	r := install.Must(t, c, install.Options{Tag: tag, Logf: t.Logf})
	t.Logf("installed (agent.apiServer %s, no kube-proxy) in %s", r.Values["agent"].(map[string]any)["apiServer"], r.Installed.Round(time.Millisecond))

	clusterIP := netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), rebootServicePort)
	nodePort := netip.AddrPortFrom(rebooted.Lab.Addr, uint16(svc.Spec.Ports[0].NodePort))
	dumps := func() string { return rebootDumps(ctx, cs, r.Namespace, rebooted) }
	if err := rebootServed(ctx, rebooted, client, clusterIP, nodePort, time.Minute); err != nil {
		t.Fatalf("before the reboot: %v\n%s", err, dumps())
	}
	before, err := rebootAgentPod(ctx, cs, r.Namespace, rebooted.Name)
	if err != nil {
		t.Fatal(err)
	}

	b, err := c.Reboot(ctx, rebooted)
	if err != nil {
		t.Fatalf("%v\n%s", err, dumps())
	}
	// The agent's rules are gone (the kubelet has just started: no pod runs yet).
	if out, err := rebooted.Lab.Exec(ctx, "nft", "list", "table", "ip", "portico"); err == nil {
		t.Fatalf("after the reboot %s still has the agent's table:\n%s", rebooted.Name, out)
	}
	t.Logf("%s rebooted: off (rules, conntrack, /run and containerd's state cleared) %s; containerd ready %s and kubelet started %s after the start",
		rebooted.Name, b.Up.Sub(b.Down).Round(time.Millisecond), b.ContainerdReady.Sub(b.Up).Round(time.Millisecond), b.KubeletStarted.Sub(b.Up).Round(time.Millisecond))

	// Serving again: the ClusterIP from inside the node and its NodePort from the LAN.
	if err := rebootServed(ctx, rebooted, client, clusterIP, nodePort, 3*time.Minute); err != nil {
		t.Fatalf("after the reboot: %v\n%s", err, dumps())
	}
	servedAfter := time.Since(b.Up)
	// The agent in a new container, Ready.
	var agentStarted time.Time
	err = wait.Poll(ctx, 100*time.Millisecond, 2*time.Minute, "the agent on "+rebooted.Name+" Ready in a container started after the reboot", func(ctx context.Context) error {
		p, err := rebootAgentPod(ctx, cs, r.Namespace, rebooted.Name)
		if err != nil {
			return err
		}
		if p.UID != before.UID {
			return wait.Stop(fmt.Errorf("the agent's pod was replaced (%s, was %s): the DaemonSet's pod should stay", p.Name, before.Name))
		}
		st := p.Status.ContainerStatuses
		if len(st) == 0 || st[0].State.Running == nil {
			return fmt.Errorf("not running: %+v", st)
		}
		if started := st[0].State.Running.StartedAt.Time; started.Before(b.Up.Truncate(time.Second)) {
			return fmt.Errorf("running since %s, before the reboot", started.Format(time.TimeOnly))
		}
		if !nodes.PodReady(p) {
			return fmt.Errorf("not Ready (restarts %d)", st[0].RestartCount)
		}
		agentStarted = st[0].State.Running.StartedAt.Time
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumps())
	}
	readyAfter := time.Since(b.Up)
	// The node reaches the API server through the kubernetes ClusterIP again (the agent's
	// rules; what the agent itself must not depend on).
	kube, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeAddr := net.JoinHostPort(kube.Spec.ClusterIP, fmt.Sprint(kube.Spec.Ports[0].Port))
	if err := rebooted.Lab.Do(func() error {
		conn, err := net.DialTimeout("tcp", kubeAddr, 5*time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}); err != nil {
		t.Errorf("the kubernetes ClusterIP %s from %s after the reboot: %v", kubeAddr, rebooted.Name, err)
	}
	t.Logf("from the start after the reboot: agent container started after %s, ClusterIP (from the node) and NodePort (from the LAN) served after %s, agent Ready seen after %s",
		agentStarted.Sub(b.Up.Truncate(time.Second)).Round(time.Second), servedAfter.Round(time.Millisecond), readyAfter.Round(time.Millisecond))

	// The agent given the kubernetes ClusterIP as its API server (no kubeconfig: the in-cluster
	// configuration, the address the kubelet gives the pod) refuses to start, saying why.
	rebootAgentRefusesClusterIP(t, c, r, other.Name)
}

// rebootAgentRefusesClusterIP runs portico-agent once in a pod on node as the chart does but
// without a kubeconfig (the in-cluster configuration) and expects it to exit at startup with
// the error naming the kubernetes ClusterIP. (On old code it would start and stop at once on
// the health port the node's agent holds.)
func rebootAgentRefusesClusterIP(t *testing.T, c *nodes.Cluster, r *install.Release, node string) {
	t.Helper()
	ctx := t.Context()
	cs := c.Client()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-in-cluster", Namespace: r.Namespace},
		Spec: corev1.PodSpec{
			NodeName:           node,
			HostNetwork:        true,
			ServiceAccountName: "portico-agent",
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "agent",
				Image:           install.Ref("portico-agent", r.Images.Tag),
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--hostname-override=" + node},
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(r.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(r.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	var code int32
	wait.For(t, 2*time.Minute, "the in-cluster agent pod to exit", func() error {
		p, err := cs.CoreV1().Pods(r.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := p.Status.ContainerStatuses; len(st) == 1 && st[0].State.Terminated != nil {
			code = st[0].State.Terminated.ExitCode
			return nil
		}
		return fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	raw, err := cs.CoreV1().Pods(r.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.TrimSpace(string(raw))
	if code == 0 || !strings.Contains(log, "is the kubernetes Service's ClusterIP") || !strings.Contains(log, "agent.apiServer") {
		t.Fatalf("the agent with the in-cluster configuration exited %d with:\n%s\nwant a startup error naming the kubernetes ClusterIP and agent.apiServer", code, log)
	}
	t.Logf("the agent with the in-cluster configuration exited %d: %s", code, log)
}

// rebootRefusedWithoutAPIServer installs with the chart's default agent.apiServer ("") and
// expects helm install to refuse it naming the value; on old code the install succeeds and
// is removed again.
func rebootRefusedWithoutAPIServer(t *testing.T, c *nodes.Cluster, tag string) {
	t.Helper()
	r, err := install.Portico(t.Context(), c, install.Options{Tag: tag, Timeout: 2 * time.Minute, Values: map[string]any{"agent": map[string]any{"apiServer": ""}}})
	if err == nil || r != nil {
		if r != nil {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if uerr := r.Uninstall(uctx); uerr != nil {
				t.Errorf("uninstalling: %v", uerr)
			}
		}
		t.Fatalf(`helm install with agent.apiServer "" was not refused (%v); want the chart to refuse it`, err)
	}
	if !strings.Contains(err.Error(), "agent.apiServer is required") {
		t.Fatalf(`helm install with agent.apiServer "": %v; want the chart's error naming agent.apiServer`, err)
	}
	t.Logf(`helm install with agent.apiServer "" refused: %v`, err)
}

// rebootEchoService creates an echo pod on node (the Deployment "echo", pinned there: the
// rebooted node serves the Service through its rules alone, never by a pod of its own) and a
// NodePort Service in front of it, and waits for the pod to be Ready.
func rebootEchoService(t *testing.T, c *nodes.Cluster, node string) *corev1.Service {
	t.Helper()
	ctx := t.Context()
	cs := c.Client()
	wait.For(t, time.Minute, "the default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	d := c.EchoDeployment(1)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "tcp", Port: rebootServicePort, TargetPort: intstr.FromInt32(nodes.EchoPort), Protocol: corev1.ProtocolTCP}},
		},
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 2*time.Minute, "the echo pod Ready on "+node, func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && nodes.PodReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("%d echo pods, none Ready on %s", len(pods.Items), node)
	})
	return svc
}

// rebootServed waits until the echo Service answers a request from inside node to its
// ClusterIP and one from client to node's NodePort.
func rebootServed(ctx context.Context, node *nodes.Node, client *netlab.Host, clusterIP, nodePort netip.AddrPort, timeout time.Duration) error {
	return wait.Poll(ctx, 100*time.Millisecond, timeout, fmt.Sprintf("%s serving the echo Service: ClusterIP %s from the node, NodePort %s from %s", node.Name, clusterIP, nodePort, client.Name), func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := node.Lab.Request(rctx, "tcp", clusterIP); err != nil {
			return err
		}
		_, err := client.Request(rctx, "tcp", nodePort)
		return err
	})
}

// rebootAgentPod is the agent's pod on node.
func rebootAgentPod(ctx context.Context, cs kubernetes.Interface, namespace, node string) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: install.AgentSelector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d agent pods on %s", len(pods.Items), node)
	}
	return &pods.Items[0], nil
}

// rebootDumps are the rebooted node's agent log (current and previous container) and its
// processes' log tails.
func rebootDumps(ctx context.Context, cs kubernetes.Interface, namespace string, n *nodes.Node) string {
	var b strings.Builder
	if p, err := rebootAgentPod(ctx, cs, namespace, n.Name); err == nil {
		for _, previous := range []bool{true, false} {
			tail := int64(40)
			raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Previous: previous, TailLines: &tail}).DoRaw(ctx)
			fmt.Fprintf(&b, "agent %s (previous container %v): %v\n%s\n", p.Name, previous, err, raw)
		}
		fmt.Fprintf(&b, "agent pod status: %+v\n", p.Status.ContainerStatuses)
	}
	b.WriteString(n.LogTails())
	return b.String()
}
