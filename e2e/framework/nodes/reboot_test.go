package nodes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestReboot: a rebooted node loses its processes, its netfilter rules and its pods' network,
// keeps its images, and its kubelet starts its pods again: the echo pod runs a new container,
// Ready, and answers at its pod IP from the node.
func TestReboot(t *testing.T) {
	c := New(t, Options{Nodes: 1})
	ctx := t.Context()
	cs := c.Client()
	n := c.Nodes[0]
	wait.For(t, time.Minute, "the default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "echo", Image: c.EchoImage, ImagePullPolicy: corev1.PullNever, Args: []string{"-tcp", fmt.Sprint(EchoPort)},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(EchoPort)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	served := func(after time.Time) func() error {
		return func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "echo", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return fmt.Errorf("not running: %+v", p.Status.ContainerStatuses)
			}
			if started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time; started.Before(after.Truncate(time.Second)) {
				return fmt.Errorf("its container started at %s, before %s", started, after)
			}
			if !PodReady(p) {
				return fmt.Errorf("not Ready")
			}
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil {
				return fmt.Errorf("pod IP %q: %w", p.Status.PodIP, err)
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err = n.Lab.Request(rctx, "tcp", netip.AddrPortFrom(ip, EchoPort))
			return err
		}
	}
	wait.For(t, 2*time.Minute, "the echo pod Ready and answering at its pod IP", served(time.Time{}))
	// A rule, as a service proxy leaves one.
	if _, err := n.Lab.Exec(ctx, "nft", "add", "table", "ip", "reboot-test"); err != nil {
		t.Fatal(err)
	}

	b, err := c.Reboot(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := n.Lab.Exec(ctx, "nft", "list", "tables"); err != nil || strings.Contains(string(out), "reboot-test") {
		t.Errorf("after the reboot the node's tables are %q (%v); want none", out, err)
	}
	wait.For(t, 2*time.Minute, "the echo pod running again after the reboot, Ready and answering at its pod IP", served(b.Up))
	t.Logf("off at %s; containerd ready after %s, kubelet started after %s, the pod served after %s",
		b.Down.Format(time.StampMilli), b.ContainerdReady.Sub(b.Up).Round(time.Millisecond), b.KubeletStarted.Sub(b.Up).Round(time.Millisecond), time.Since(b.Up).Round(time.Millisecond))
}
