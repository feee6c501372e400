// Package services holds the Service helpers every control-plane suite uses: a LoadBalancer
// Service to start from, create, get, update with conflict retries, delete, and waits for a
// state of the Service, its deletion or an Event about it. Helper binds them to a test, a
// clientset and a namespace, and fails the test on error.
package services

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

// New is a ClusterIP Service ns/name with one port "http" 80/TCP, selector app=name and an
// empty annotation map, after each mutate.
func New(ns, name string, mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

// LoadBalancer is New of type LoadBalancer.
func LoadBalancer(ns, name string, mutate ...func(*corev1.Service)) *corev1.Service {
	return New(ns, name, append([]func(*corev1.Service){func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }}, mutate...)...)
}

// WithClass sets spec.loadBalancerClass ("" leaves the Service class-less).
func WithClass(class string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if class != "" {
			s.Spec.LoadBalancerClass = &class
		}
	}
}

// Update gets Service ns/name, applies mutate and updates it, retrying on conflicts (a
// controller may write it in between). mutate sees a non-nil annotation map.
func Update(ctx context.Context, cs kubernetes.Interface, ns, name string, mutate func(*corev1.Service)) (*corev1.Service, error) {
	var out *corev1.Service
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		mutate(svc)
		out, err = cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("updating Service %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// Events lists the Events about the object ns/name (a Service, or another object the helpers'
// users report on, such as an AddressPool), in the apiserver's order.
func Events(ctx context.Context, cs kubernetes.Interface, ns, name string) ([]corev1.Event, error) {
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil, fmt.Errorf("listing Events of %s/%s: %w", ns, name, err)
	}
	return list.Items, nil
}

// DefaultTimeout is Helper's wait when Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Helper runs the helpers for one test against one namespace, failing TB on error.
type Helper struct {
	TB        testing.TB
	CS        kubernetes.Interface
	Namespace string
	Timeout   time.Duration // for the waits; 0: DefaultTimeout
	// Dumps are added to a wait's failure message (e.g. a process's log tail).
	Dumps []func() string
	// Alive, when set, is checked on every poll of a wait: an error ends the wait at once (the
	// process under test exited).
	Alive func() error
}

func (h Helper) timeout() time.Duration {
	if h.Timeout == 0 {
		return DefaultTimeout
	}
	return h.Timeout
}

// LoadBalancer is LoadBalancer in the Helper's namespace.
func (h Helper) LoadBalancer(name string, mutate ...func(*corev1.Service)) *corev1.Service {
	return LoadBalancer(h.Namespace, name, mutate...)
}

// Create creates svc (in its own namespace, else the Helper's).
func (h Helper) Create(svc *corev1.Service) *corev1.Service {
	h.TB.Helper()
	ns := svc.Namespace
	if ns == "" {
		ns = h.Namespace
	}
	out, err := h.CS.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		h.TB.Fatalf("creating Service %s/%s: %v", ns, svc.Name, err)
	}
	return out
}

// CreateTemp is Create that deletes the Service again when TB ends.
func (h Helper) CreateTemp(svc *corev1.Service) *corev1.Service {
	h.TB.Helper()
	out := h.Create(svc)
	h.TB.Cleanup(func() {
		_ = h.CS.CoreV1().Services(out.Namespace).Delete(context.Background(), out.Name, metav1.DeleteOptions{})
	})
	return out
}

// HasIngressIPs accepts a Service whose status lists every address in want (and maybe more).
func HasIngressIPs(want ...netip.Addr) func(*corev1.Service) string {
	return func(s *corev1.Service) string {
		got := map[netip.Addr]bool{}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				got[a] = true
			}
		}
		for _, w := range want {
			if !got[w] {
				return fmt.Sprintf("ingress %v lacks %s", s.Status.LoadBalancer.Ingress, w)
			}
		}
		return ""
	}
}

// Get returns Service name.
func (h Helper) Get(name string) *corev1.Service {
	h.TB.Helper()
	svc, err := h.CS.CoreV1().Services(h.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.TB.Fatalf("getting Service %s/%s: %v", h.Namespace, name, err)
	}
	return svc
}

// Update is Update in the Helper's namespace.
func (h Helper) Update(name string, mutate func(*corev1.Service)) *corev1.Service {
	h.TB.Helper()
	out, err := Update(context.Background(), h.CS, h.Namespace, name, mutate)
	if err != nil {
		h.TB.Fatal(err)
	}
	return out
}

// Delete deletes Service name.
func (h Helper) Delete(name string) {
	h.TB.Helper()
	if err := h.CS.CoreV1().Services(h.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.TB.Fatalf("deleting Service %s/%s: %v", h.Namespace, name, err)
	}
}

// Eventually waits for cond (nil when it holds) under the Helper's timeout, Alive and Dumps.
func (h Helper) Eventually(what string, cond func() error) {
	h.TB.Helper()
	wait.For(h.TB, h.timeout(), what, func() error {
		if h.Alive != nil {
			if err := h.Alive(); err != nil {
				return wait.Stop(err)
			}
		}
		return cond()
	}, h.Dumps...)
}

// Wait waits until check accepts Service name (returns ""; else it says what is missing) and
// returns the Service it accepted.
func (h Helper) Wait(name, what string, check func(*corev1.Service) string) *corev1.Service {
	h.TB.Helper()
	var svc *corev1.Service
	h.Eventually(name+": "+what, func() error {
		var err error
		if svc, err = h.CS.CoreV1().Services(h.Namespace).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		if why := check(svc); why != "" {
			return fmt.Errorf("%s (status %+v)", why, svc.Status)
		}
		return nil
	})
	return svc
}

// WaitGone waits until Service name no longer exists (its finalizers released).
func (h Helper) WaitGone(name string) {
	h.TB.Helper()
	h.Eventually(name+" to be deleted", func() error {
		svc, err := h.CS.CoreV1().Services(h.Namespace).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, finalizers %v", svc.Finalizers)
	})
}

// WaitEvent waits for an Event with reason about Service name whose note contains substr,
// and returns it.
func (h Helper) WaitEvent(name, reason, substr string) corev1.Event {
	h.TB.Helper()
	var found corev1.Event
	h.Eventually(fmt.Sprintf("Event %s %q about %s", reason, substr, name), func() error {
		evs, err := Events(context.Background(), h.CS, h.Namespace, name)
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs {
			if ev.Reason == reason && strings.Contains(ev.Message, substr) {
				found = ev
				return nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return fmt.Errorf("Events so far: %q", seen)
	})
	return found
}

// Reasons lists the reasons of the Events about Service name.
func (h Helper) Reasons(name string) []string {
	h.TB.Helper()
	evs, err := Events(context.Background(), h.CS, h.Namespace, name)
	if err != nil {
		h.TB.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Reason)
	}
	return out
}
