package operations

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// TestAnnounceForeignClassNotAnswered (issue 31, item 5): a Service of a class Portico does not
// serve, whose status an attacker (anyone with services/status, or another implementation)
// set to an address of a Portico pool with layer-2 announcement, draws no ARP answer from any
// agent, while the VIP the controller gave a Portico (class-less) Service created after it is
// answered by exactly one node. The Portico Service comes second, so once its VIP is answered
// every agent has seen the forged status too (one Service watch, in order). On 3e563f2 the
// elected node answered ARP for the forged address as well.
func TestAnnounceForeignClassNotAnswered(t *testing.T) {
	const forged, vip = "198.18.222.9", "198.18.222.5"
	l := announceStart(t, "198.18.222.0/28")
	h := services.Helper{TB: t, CS: l.CS, Namespace: announceNamespace, Timeout: 60 * time.Second}

	other := "example.com/other-lb"
	intruder := h.Create(h.LoadBalancer("intruder", func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &other
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}}
	}))
	intruder.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: forged}}
	if _, err := l.CS.CoreV1().Services(announceNamespace).UpdateStatus(context.Background(), intruder, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("forging the status of intruder: %v", err)
	}

	h.Create(h.LoadBalancer("web", func(s *corev1.Service) {
		s.Annotations["portico-lb.io/loadBalancerIPs"] = vip
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}}
	}))
	h.Wait("web", "ingress "+vip, services.HasIngressIPs(netip.MustParseAddr(vip)))
	var answered []string
	wait.For(t, 60*time.Second, "exactly one node answering ARP for the Portico VIP "+vip, func() error {
		who, out := l.arping(vip, 2)
		if len(who) != 1 {
			return fmt.Errorf("answered by %v:\n%s", who, out)
		}
		answered = who
		return nil
	})
	t.Logf("%s is answered by %s", vip, answered[0])

	if who, out := l.arping(forged, 3); len(who) > 0 {
		t.Errorf("the forged address %s of intruder (class %s) is answered by %v:\n%s", forged, other, who, out)
	}
}
