package nodeproxy

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/serviceports"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// ReasonExternalIPsRefused is the reason of the Warning Event on a Service whose spec.externalIPs
// the agents' externalIPs policy refuses (all or some of them).
const ReasonExternalIPsRefused = "ExternalIPsRefused"

// The events.k8s.io/v1 API's limits on an Event's note and reportingInstance.
const (
	maxEventNote         = 1024
	maxReportingInstance = 128
)

// externalIPsEvents is the sync loop's consumer that records a Warning Event
// ReasonExternalIPsRefused on each Service whose externalIPs the policy refuses, naming the
// addresses and the setting. The proxiers leave those addresses out on their own
// (serviceports); this consumer only tells the Service's owner.
//
// One Event per Service and refusal, however many nodes: every agent refuses the same addresses
// (the chart gives all of them one configuration) and would record the same Event. Its name is
// a hash of the Service's UID and the note, so the first agent's Create makes it and every
// other agent's Create gets AlreadyExists, which counts as done: the API server deduplicates,
// atomically, with no election and no watch of the other nodes (the events library's
// correlator folds repeats within one process only, and its Events are named by time). An
// agent configured differently writes a different note, so its Event stands apart. Each agent
// tries once per change of a Service's refusal (its Create happens off the sync loop, retried
// with back-off while the API server fails); a restarted agent tries again, and meets
// AlreadyExists while the Event lives (the API server's --event-ttl, 1 h by default).
type externalIPsEvents struct {
	log    logr.Logger
	policy config.ExternalIPPolicy
	cs     kubernetes.Interface
	node   string
	// sent is, per Service, the name of the Event last handed to the queue (sync loop only).
	sent  map[types.NamespacedName]string
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
	mu    sync.Mutex
	// pending are the Events to create, by Service (the queue's items).
	pending map[types.NamespacedName]*eventsv1.Event
}

// maxEventRetries bounds the Creates of one Event that the API server fails (not AlreadyExists).
const maxEventRetries = 8

// newExternalIPsEvents returns the consumer and starts its worker, which stops with ctx.
func newExternalIPsEvents(ctx context.Context, log logr.Logger, cs kubernetes.Interface, node string, policy config.ExternalIPPolicy) *externalIPsEvents {
	e := &externalIPsEvents{log: log, policy: policy, cs: cs, node: node,
		sent: map[types.NamespacedName]string{}, pending: map[types.NamespacedName]*eventsv1.Event{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](500*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "externalips-events"}),
	}
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
	go e.work(ctx)
	return e
}

// Name implements Consumer.
func (e *externalIPsEvents) Name() string { return "externalips-events" }

// Sync queues an Event for each changed Service whose refused externalIPs differ from the last
// it queued. It never fails: Events are best effort and retried on their own.
func (e *externalIPsEvents) Sync(_ context.Context, st *tracker.State) error {
	if st.Full {
		// Forget the Services that are gone.
		listed := make(map[types.NamespacedName]bool, len(st.Changed))
		for _, k := range st.Changed {
			listed[k] = true
		}
		for k := range e.sent {
			if !listed[k] {
				delete(e.sent, k)
			}
		}
	}
	for _, key := range st.Changed {
		svc, _, err := st.Service(key)
		if err != nil || svc == nil {
			delete(e.sent, key)
			continue
		}
		refused := serviceports.RefusedExternalIPs(svc, e.policy)
		if len(refused) == 0 {
			delete(e.sent, key)
			continue
		}
		ev := externalIPsEvent(svc, refused, e.policy, e.node, time.Now())
		if e.sent[key] == ev.Name {
			continue
		}
		e.sent[key] = ev.Name
		e.log.Info("Refusing a Service's externalIPs", "service", key, "addresses", refused, "policy", e.policy.Policy)
		e.mu.Lock()
		e.pending[key] = ev
		e.mu.Unlock()
		e.queue.Add(key)
	}
	return nil
}

// work creates the pending Events until the queue shuts down.
func (e *externalIPsEvents) work(ctx context.Context) {
	for {
		key, shutdown := e.queue.Get()
		if shutdown {
			return
		}
		e.mu.Lock()
		ev := e.pending[key]
		e.mu.Unlock()
		created, err := e.create(ctx, ev)
		switch {
		case err == nil:
			if ev != nil {
				// created false: another agent's Create came first.
				e.log.V(1).Info("Recorded the ExternalIPsRefused Event", "service", key, "event", ev.Name, "created", created)
			}
			e.queue.Forget(key)
			e.mu.Lock()
			if e.pending[key] == ev {
				delete(e.pending, key)
			}
			e.mu.Unlock()
		case ctx.Err() != nil:
			e.queue.Forget(key) // stopping
		case e.queue.NumRequeues(key) < maxEventRetries:
			e.queue.AddRateLimited(key)
		default:
			e.log.Error(err, "Cannot record the ExternalIPsRefused Event", "service", key)
			e.queue.Forget(key)
		}
		e.queue.Done(key)
	}
}

// create creates ev; an Event of its name already there (another agent's) is success, with
// created false.
func (e *externalIPsEvents) create(ctx context.Context, ev *eventsv1.Event) (created bool, err error) {
	if ev == nil {
		return false, nil
	}
	_, err = e.cs.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// externalIPsEvent is the Event telling svc's owner that refused are not programmed, named
// after the Service's UID and the note (see externalIPsEvents).
func externalIPsEvent(svc *corev1.Service, refused []string, policy config.ExternalIPPolicy, node string, now time.Time) *eventsv1.Event {
	note := externalIPsNote(refused, policy)
	instance := eventsComponent + "-" + node
	if len(instance) > maxReportingInstance {
		instance = instance[:maxReportingInstance]
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\n%s", svc.UID, note)
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s.externalips-%016x", svc.Name, h.Sum64())},
		EventTime:  metav1.NewMicroTime(now),
		// The events library's names for the reporter: the component, and the component on
		// this node (the first agent's Create wins).
		ReportingController: eventsComponent,
		ReportingInstance:   instance,
		Action:              "Program",
		Reason:              ReasonExternalIPsRefused,
		Type:                corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
			UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Note: note,
	}
}

// externalIPsNote names the refused addresses and the setting that refuses them, within the
// API's limit on notes.
func externalIPsNote(refused []string, policy config.ExternalIPPolicy) string {
	why := "the agents' externalIPs policy is deny (portico-agent --external-ip-policy, chart value agent.externalIPs.policy)"
	if policy.Policy == config.ExternalIPsCIDRs {
		cidrs := make([]string, len(policy.AllowedCIDRs))
		for i, p := range policy.AllowedCIDRs {
			cidrs[i] = p.String()
		}
		why = fmt.Sprintf("they are outside the agents' externalIPs allow-list %s (portico-agent --external-ip-policy=cidrs, --external-ip-allowed-cidrs; chart value agent.externalIPs.allowedCIDRs)",
			strings.Join(cidrs, ", "))
	}
	note := fmt.Sprintf("portico-agent programs no rule for externalIPs %s: %s; traffic to them is not forwarded to this Service", strings.Join(refused, ", "), why)
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	return note
}
