package cluster_test

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/portico-lb/portico/e2e/framework/cluster"
)

func TestEndpointSliceFromReadyPodAndCleanStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	dir := c.Dir()
	cs := c.Client()

	if _, err := c.RegisterNode(ctx, cluster.NodeSpec{Name: "node-a", InternalIPs: []netip.Addr{netip.MustParseAddr("198.19.0.11")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, "demo"); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := cs.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "demo", Labels: map[string]string{"app": "web"}}}
	if _, err := c.CreateReadyPod(ctx, pod, "node-a", netip.MustParseAddr("198.19.1.5")); err != nil {
		t.Fatal(err)
	}

	var got []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices("demo").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err
		}
		got = nil
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					got = append(got, ep.Addresses...)
				}
			}
		}
		return len(got) > 0, nil
	})
	if err != nil {
		t.Fatalf("no ready endpoint in an EndpointSlice for demo/web: %v", err)
	}
	if len(got) != 1 || got[0] != "198.19.1.5" {
		t.Fatalf("EndpointSlice addresses = %v, want [198.19.1.5]", got)
	}

	pids := c.PIDs()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for name, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.Contains(string(b), name) {
				t.Errorf("%s (pid %d) still running after Stop", name, pid)
			}
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still present after Stop (err=%v)", dir, err)
	}
}
