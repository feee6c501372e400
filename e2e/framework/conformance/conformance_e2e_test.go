package conformance

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestKubeProxyColumn: the pieces of a kube-proxy column work together: kube-proxy (nftables
// mode, from the built image) becomes Ready on every node, the agnhost image runs netexec, and
// the tester reaches a NodePort with externalTrafficPolicy Local from TesterAddr, which the
// pod sees unchanged.
func TestKubeProxyColumn(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 2, DNS: true, Router: true}) // fails or skips naming the fix
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	bins, err := Build(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := BuildImages(ctx, t.TempDir(), bins, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		for _, img := range imgs.All() {
			if err := n.ImportImage(ctx, img.Archive); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), imgs.KubeProxy.Ref, NFTables, len(c.Nodes)); err != nil {
		t.Fatal(err)
	}
	tester, err := NewTester(ctx, c, ViaEveryNode)
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Client()
	labels := map[string]string{"app": "netexec"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: c.Nodes[1].Name,
			Containers: []corev1.Container{{
				Name: "netexec", Image: AgnhostRef, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:           []string{"netexec", "--http-port=8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "nc -h 2>&1 | grep -q OpenBSD && curl -sf http://127.0.0.1:8080/hostname"}}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Selector: labels, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := netip.AddrPortFrom(c.Nodes[1].Lab.Addr, uint16(svc.Spec.Ports[0].NodePort))
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return tester.DialTCP(ctx, target) },
	}}
	err = wait.Poll(ctx, time.Second, 3*time.Minute, fmt.Sprintf("netexec's /clientip through NodePort %s from the tester", target), func(ctx context.Context) error {
		resp, err := client.Get("http://" + target.String() + "/clientip")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(strings.TrimSpace(string(b))); host != TesterAddr.String() {
			return wait.Stop(fmt.Errorf("the pod saw %q, want %s", b, TesterAddr))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
