package nodeproxy

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// servicesStore is a tracker.Store of Services only.
type servicesStore map[types.NamespacedName]*corev1.Service

func (s servicesStore) Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	return s[key], nil, nil
}
func (s servicesStore) Services() ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	for k := range s {
		out = append(out, k)
	}
	return out, nil
}
func (servicesStore) Node() *corev1.Node                            { return nil }
func (servicesStore) Nodes() ([]*corev1.Node, error)                { return nil, nil }
func (servicesStore) AddressPools() ([]v1alpha1.AddressPool, error) { return nil, nil }

// TestExternalIPsRefusedEventOncePerService (issue 31 item 6): agents on two nodes refusing the
// same externalIPs leave one Warning Event on the Service, naming the addresses and the
// setting; a changed refusal gets a new Event; a Service whose addresses are all allowed, or
// that has none, gets none. The real API server and agents: e2e/suites/operations
// TestExternalIPPolicy.
func TestExternalIPsRefusedEventOncePerService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubefake.NewClientset()
	policy := config.ExternalIPPolicy{Policy: config.ExternalIPsCIDRs, AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24")}}
	svc := func(name string, ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.10", ExternalIPs: ips}}
	}
	store := servicesStore{
		{Namespace: "ns", Name: "taker"}:   svc("taker", "198.18.64.5", "198.18.65.5", "198.18.65.6"),
		{Namespace: "ns", Name: "allowed"}: svc("allowed", "198.18.64.6"),
		{Namespace: "ns", Name: "plain"}:   svc("plain"),
	}
	agents := []*externalIPsEvents{
		newExternalIPsEvents(ctx, logr.Discard(), cs, "node1", policy),
		newExternalIPsEvents(ctx, logr.Discard(), cs, "node2", policy),
	}
	sync := func() {
		t.Helper()
		keys, _ := store.Services()
		for _, a := range agents {
			if err := a.Sync(ctx, &tracker.State{Full: true, Changed: keys, Store: store}); err != nil {
				t.Fatal(err)
			}
		}
		// Both agents' Creates done.
		for _, a := range agents {
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				a.mu.Lock()
				defer a.mu.Unlock()
				return len(a.pending) == 0 && a.queue.Len() == 0, nil
			})
			if err != nil {
				t.Fatalf("%s: Events still pending: %v", a.node, err)
			}
		}
	}
	events := func() []string {
		t.Helper()
		list, err := cs.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range list.Items {
			if ev.Reason != ReasonExternalIPsRefused || ev.Type != corev1.EventTypeWarning || ev.Regarding.Kind != "Service" {
				t.Errorf("Event %+v", ev)
			}
			out = append(out, ev.Regarding.Name+": "+ev.Note)
		}
		return out
	}
	sync()
	sync() // a resync records nothing new
	got := events()
	if len(got) != 1 || !strings.HasPrefix(got[0], "taker: ") {
		t.Fatalf("Events %q; want one, on taker", got)
	}
	for _, want := range []string{"198.18.65.5, 198.18.65.6", "198.18.64.0/24", "--external-ip-allowed-cidrs", "agent.externalIPs.allowedCIDRs"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("note %q does not name %s", got[0], want)
		}
	}
	if strings.Contains(got[0], "198.18.64.5,") || strings.Contains(got[0], "198.18.64.5 ") {
		t.Errorf("note %q names the allowed address", got[0])
	}
	store[types.NamespacedName{Namespace: "ns", Name: "taker"}].Spec.ExternalIPs = []string{"198.18.66.1"}
	sync()
	if got := events(); len(got) != 2 {
		t.Errorf("after the refusal changed: Events %q; want a second one", got)
	}
}

// TestExternalIPsNoteDeny: the deny policy's note names the setting, and a long list is cut to
// the API's limit.
func TestExternalIPsNoteDeny(t *testing.T) {
	note := externalIPsNote([]string{"198.18.64.5"}, config.ExternalIPPolicy{Policy: config.ExternalIPsDeny})
	for _, want := range []string{"198.18.64.5", "deny", "--external-ip-policy", "agent.externalIPs.policy"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q does not name %s", note, want)
		}
	}
	var many []string
	for i := range 200 {
		many = append(many, netip.AddrFrom4([4]byte{198, 18, 64, byte(i)}).String())
	}
	if n := len(externalIPsNote(many, config.ExternalIPPolicy{Policy: config.ExternalIPsDeny})); n > maxEventNote {
		t.Errorf("note of %d bytes; the API takes %d", n, maxEventNote)
	}
}
