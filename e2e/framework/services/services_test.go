package services_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/portico-lb/portico/e2e/framework/services"
)

// The real apiserver is exercised by every suite that uses these helpers; these tests use the
// fake clientset as a seam to check the helpers' own logic: conflict retries and wait messages.

func TestUpdateRetriesConflicts(t *testing.T) {
	cs := fake.NewClientset(services.LoadBalancer("ns", "web"))
	conflicts := 2
	cs.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, errConflict()
		}
		return false, nil, nil
	})
	h := services.Helper{TB: t, CS: cs, Namespace: "ns"}
	out := h.Update("web", func(s *corev1.Service) { s.Annotations["a"] = "b" })
	if conflicts != 0 || out.Annotations["a"] != "b" || h.Get("web").Annotations["a"] != "b" {
		t.Fatalf("after update: conflicts left %d, annotations %v", conflicts, out.Annotations)
	}
}

type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatal(args ...any)                 { f.msg = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestWaitMessages(t *testing.T) {
	svc := services.LoadBalancer("ns", "web", services.WithClass("portico.io/lb"))
	if svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass != "portico.io/lb" || svc.Spec.Selector["app"] != "web" {
		t.Fatalf("LoadBalancer built %+v", svc.Spec)
	}
	cs := fake.NewClientset(svc)
	f := &fakeTB{TB: t}
	h := services.Helper{TB: f, CS: cs, Namespace: "ns", Timeout: 100 * time.Millisecond, Dumps: []func() string{func() string { return "controller log" }}}
	h.Wait("web", "an ingress", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return "no ingress"
		}
		return ""
	})
	for _, want := range []string{"web: an ingress", "no ingress", "controller log"} {
		if !strings.Contains(f.msg, want) {
			t.Errorf("failure %q does not contain %q", f.msg, want)
		}
	}

	f.msg = ""
	h.Alive = func() error { return fmt.Errorf("controller exited") }
	begin := time.Now()
	h.Timeout = time.Minute
	h.WaitGone("web")
	if !strings.Contains(f.msg, "controller exited") || time.Since(begin) > 10*time.Second {
		t.Errorf("a dead process did not end the wait at once: %q after %v", f.msg, time.Since(begin))
	}

	f.msg = ""
	h.Alive = nil
	if _, err := cs.CoreV1().Events("ns").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Name: "web", Namespace: "ns"},
		Reason:         "Allocated", Message: "198.18.0.1 from pool a",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := h.WaitEvent("web", "Allocated", "pool a"); ev.Name != "e1" || f.msg != "" {
		t.Errorf("WaitEvent = %s, failure %q", ev.Name, f.msg)
	}
	if r := h.Reasons("web"); len(r) != 1 || r[0] != "Allocated" {
		t.Errorf("Reasons = %v", r)
	}
}

func errConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "web", fmt.Errorf("changed"))
}

func TestHasIngressIPs(t *testing.T) {
	svc := services.LoadBalancer("ns", "web")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.128.1"}, {IP: "fd00:c613:ff01::1"}}
	if why := services.HasIngressIPs(netip.MustParseAddr("198.18.128.1"), netip.MustParseAddr("fd00:c613:ff01::1"))(svc); why != "" {
		t.Errorf("both present: %s", why)
	}
	if why := services.HasIngressIPs(netip.MustParseAddr("198.18.128.2"))(svc); !strings.Contains(why, "198.18.128.2") {
		t.Errorf("missing address: %q", why)
	}
}
