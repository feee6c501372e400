package install

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// echoWorkload is a user's workload before Portico: three echo pods (Deployment "echo") and a
// LoadBalancer Service "echo" of Portico's default class, which stays pending while no
// load-balancer controller runs. It returns the Services helper and the pods once all three
// are Ready.
func echoWorkload(t *testing.T, c *nodes.Cluster) (services.Helper, []corev1.Pod) {
	t.Helper()
	ctx, cs := t.Context(), c.Client()
	wait.For(t, time.Minute, "the default ServiceAccount and kube-root-ca.crt", func() error {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, c.EchoDeployment(3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcs := services.Helper{TB: t, CS: cs, Namespace: "default", Timeout: 3 * time.Minute}
	svcs.Create(svcs.LoadBalancer("echo", services.WithClass(install.DefaultClass), func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": "echo"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: nodes.EchoPort, TargetPort: intstr.FromInt32(nodes.EchoPort), Protocol: corev1.ProtocolTCP}}
	}))
	var pods []corev1.Pod
	wait.For(t, 3*time.Minute, "3 echo pods Ready", func() error {
		pl, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		pods = pl.Items
		ready := 0
		for _, p := range pods {
			if nodes.PodReady(&p) {
				ready++
			}
		}
		if ready != 3 || len(pods) != 3 {
			return fmt.Errorf("%d of %d pods Ready", ready, len(pods))
		}
		return nil
	})
	return svcs, pods
}

// waitVIP waits until the Service "echo" has one ingress IP and checks that it comes from pool.
func waitVIP(t *testing.T, svcs services.Helper, pool netip.Prefix) (*corev1.Service, netip.Addr) {
	t.Helper()
	svc := svcs.Wait("echo", "an ingress IP from the pool", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Sprintf("ingress %+v", s.Status.LoadBalancer.Ingress)
		}
		return ""
	})
	vip := netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	if !pool.Contains(vip) {
		t.Fatalf("VIP %s is not from the pool %s", vip, pool)
	}
	return svc, vip
}

// firstReply waits until from is served through target (what: who is asking, for the message).
func firstReply(t *testing.T, from *netlab.Host, target netip.AddrPort, what string) netlab.Reply {
	t.Helper()
	var reply netlab.Reply
	err := wait.Poll(t.Context(), 100*time.Millisecond, 2*time.Minute, what+" served through "+target.String(), func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		reply, err = from.Request(rctx, "tcp", target)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return reply
}
