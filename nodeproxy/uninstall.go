package nodeproxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// How a stopping agent tells an uninstall from a restart.
//
// A DaemonSet's pods stop for two reasons that look alike from inside: the pod is replaced
// (helm upgrade, a rolling update, a deleted pod, a restart), and the next agent takes over the
// rules, announcements and membership where this one left them; or the agent is uninstalled
// (helm uninstall, kubectl delete), and nothing will ever take over. The garbage collector
// deletes the pods of a DaemonSet only once the DaemonSet is gone or being deleted (cascading
// deletion), so the agent (--daemonset) tells them apart by its DaemonSet, and only by what it
// sees of it: NotFound or a deletion timestamp is an uninstall; any other answer, errors
// included, is a restart. A 401 or 403 says nothing about the DaemonSet: a Role recreated by a
// GitOps sync or an upgrade while pods roll, or an authorization webhook's hiccup, must not
// make every agent withdraw its routes and remove its rules (issue 31).
//
// helm uninstall deletes the DaemonSet and then, at once, the agent's Role, RoleBinding and
// ServiceAccount, before the pods stop: a read at SIGTERM then often gets 403 or 401. So the
// agent watches its DaemonSet while it runs (daemonSetWatch: list and watch on that one object,
// whose Role allows it); an established watch keeps delivering events after its RBAC or
// ServiceAccount is gone, and the DaemonSet's deletion normally reaches the agent well before
// the garbage collector's deletion of the pod has reached its kubelet. At exit the agent reads the DaemonSet: found and
// not being deleted is a restart, NotFound or being deleted an uninstall; when the read fails,
// what the watch last saw decides: deleted or being deleted is an uninstall. Otherwise it reads
// again, backing off (0.25, 0.5, 1, 2 s apart), and looks at the watch every 0.25 s until
// uninstallCheckBudget is spent (giving a late watch event time to arrive: a restart while the
// agent's RBAC is broken takes those 6 s longer), and then stops as for a restart: rules that stay are the safe side, and `portico-agent --cleanup`
// removes them by hand. The decision and its reason are logged ("Stopping", decision, reason).
// The check runs on every node whose agent runs at the time, including nodes that joined after
// the install.

// The agent's exit at an uninstall is bounded step by step, and the steps add up to
// exitWorstCase, which must stay below the pod's termination grace period (15 s in the chart,
// TestExitWithinGracePeriod): past it the kubelet kills the agent with its rules in place.
// Measured at an uninstall in the install suite, everything from the read to the agent's last
// line takes 0.03-0.32 s; the bounds only matter when the API server does not answer.
const (
	// uninstallCheckBudget bounds the reading of the DaemonSet: each read has
	// uninstallCheckTimeout, and a read that fails (an API server slow under load, a connection
	// reset) is tried again until the budget is spent.
	uninstallCheckBudget  = 6 * time.Second
	uninstallCheckTimeout = 2 * time.Second
	uninstallCheckEvery   = 250 * time.Millisecond
	// bgpStopTimeout bounds the graceful BGP shutdown (withdraw, or not for a graceful
	// restart, then close the sessions).
	bgpStopTimeout = 3 * time.Second
	// uninstallCleanupTimeout bounds the removal of the rules.
	uninstallCleanupTimeout = 3 * time.Second
	// exitWorstCase: the read, leaving membership, stopping BGP, removing the rules.
	exitWorstCase = uninstallCheckBudget + membershipStopTimeout + bgpStopTimeout + uninstallCleanupTimeout
)

// daemonSetState is what the agent knows of its DaemonSet.
type daemonSetState int32

const (
	daemonSetUnknown  daemonSetState = iota // not seen (yet)
	daemonSetDeployed                       // exists, no deletion timestamp
	daemonSetDeleting                       // exists with a deletion timestamp
	daemonSetGone                           // NotFound, or a delete seen
)

func (s daemonSetState) String() string {
	return [...]string{"unknown", "deployed", "being deleted", "gone"}[s]
}

// uninstalled reports whether s means an uninstall.
func (s daemonSetState) uninstalled() bool { return s == daemonSetDeleting || s == daemonSetGone }

func stateOf(ds *appsv1.DaemonSet) daemonSetState {
	if ds.DeletionTimestamp != nil {
		return daemonSetDeleting
	}
	return daemonSetDeployed
}

// splitDaemonSetRef splits ref ("namespace/name"); ok is false for a malformed ref.
func splitDaemonSetRef(ref string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(ref, "/")
	return ns, name, ok && ns != "" && name != ""
}

// daemonSetReader reads the DaemonSet ref ("namespace/name"): deployed, being deleted, or gone
// (NotFound). Every other answer (Forbidden, Unauthorized, a timeout) is an error: it does not
// say whether the DaemonSet exists. A malformed ref, or no client, gives nil: nothing to check.
func daemonSetReader(cs kubernetes.Interface, ref string) func(context.Context) (daemonSetState, error) {
	ns, name, ok := splitDaemonSetRef(ref)
	if !ok || cs == nil {
		return nil
	}
	return func(ctx context.Context) (daemonSetState, error) {
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return daemonSetGone, nil
		case err != nil:
			return daemonSetUnknown, fmt.Errorf("getting DaemonSet %s: %w", ref, err)
		}
		return stateOf(ds), nil
	}
}

// daemonSetWatch follows the agent's DaemonSet while the agent runs, through an informer on
// that one object (a field selector on its name, which RBAC matches against the Role's
// resourceNames), and keeps the state it last saw.
type daemonSetWatch struct {
	ref   string
	log   logr.Logger
	state atomic.Int32 // a daemonSetState
}

// startDaemonSetWatch starts watching ref until stop is closed; nil without a client or ref.
func startDaemonSetWatch(cs kubernetes.Interface, ref string, log logr.Logger, stop <-chan struct{}) *daemonSetWatch {
	ns, name, ok := splitDaemonSetRef(ref)
	if !ok || cs == nil {
		return nil
	}
	w := &daemonSetWatch{ref: ref, log: log}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Apps().V1().DaemonSets().Informer()
	var failures atomic.Int32
	// Without list and watch on the DaemonSet (RBAC older than the agent's) the reflector
	// retries with backoff; say so once, then only at V(1).
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if failures.Add(1) == 1 {
			log.Info("Cannot watch the agent's DaemonSet (it needs get, list and watch on it); at exit only reading it tells an uninstall", "daemonSet", ref, "err", err.Error())
			return
		}
		log.V(1).Info("Cannot watch the agent's DaemonSet", "daemonSet", ref, "err", err.Error())
	})
	// ours unwraps a deletion's tombstone and picks the agent's DaemonSet (the field selector
	// already does; a client that ignores it does not).
	ours := func(obj any) (*appsv1.DaemonSet, bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		ds, ok := obj.(*appsv1.DaemonSet)
		return ds, ok && ds.Namespace == ns && ds.Name == name
	}
	see := func(obj any) {
		if ds, ok := ours(obj); ok {
			w.set(stateOf(ds))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
		DeleteFunc: func(obj any) {
			if _, ok := ours(obj); ok {
				w.set(daemonSetGone)
			}
		},
	}); err != nil {
		log.Error(err, "Cannot watch the agent's DaemonSet", "daemonSet", ref)
		return nil
	}
	factory.Start(stop)
	go func() {
		if cache.WaitForCacheSync(stop, inf.HasSynced) {
			log.Info("Watching the agent's DaemonSet", "daemonSet", ref, "state", w.seen().String())
		}
	}()
	return w
}

func (w *daemonSetWatch) set(s daemonSetState) {
	if old := daemonSetState(w.state.Swap(int32(s))); old != s && s.uninstalled() {
		w.log.Info("The agent's DaemonSet is "+s.String(), "daemonSet", w.ref)
	}
}

// seen is the state last seen (unknown without a watch).
func (w *daemonSetWatch) seen() daemonSetState {
	if w == nil {
		return daemonSetUnknown
	}
	return daemonSetState(w.state.Load())
}

// uninstallingAt reports whether the agent, now stopping, is being uninstalled: it was told to
// stop (signalled; an agent failing on its own is restarted by its kubelet) and its DaemonSet
// is gone or being deleted, as read now (a.readDaemonSet) or, when the read fails, as the
// watch last saw it (a.daemonSetWatch). A failed read is tried again for up to budget; without
// --daemonset, or when neither tells, it is not. The decision is logged with its reason either
// way, the line a user (and the install suite) reads to learn why the rules went or stayed.
func (a *agent) uninstallingAt(signalled bool, budget time.Duration) bool {
	if !signalled || a.readDaemonSet == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var state daemonSetState
	var reason string
	var lastErr error
	tries := 0
	// Reads that fail are tried again further and further apart (a refused one is refused on
	// every node at once: a recreated Role must not turn into every agent reading four times a
	// second); the watch is looked at every uninstallCheckEvery meanwhile.
	var nextRead time.Time
	gap := uninstallCheckEvery
	watched := func() bool {
		if seen := a.daemonSetWatch.seen(); lastErr != nil && seen.uninstalled() {
			state, reason = seen, "watched: the DaemonSet is "+seen.String()+" (reading it failed)"
			return true
		}
		return false
	}
	err := wait.PollUntilContextCancel(ctx, uninstallCheckEvery, true, func(ctx context.Context) (bool, error) {
		if watched() {
			return true, nil
		}
		if time.Now().Before(nextRead) {
			return false, nil
		}
		tries++
		rctx, cancel := context.WithTimeout(ctx, uninstallCheckTimeout)
		defer cancel()
		s, err := a.readDaemonSet(rctx)
		if err == nil {
			state, reason = s, "read: the DaemonSet is "+s.String()
			return true, nil
		}
		// Report the API server's answer (a 403, a 401) rather than a later try's
		// client-side timeout or rate limit.
		var status apierrors.APIStatus
		if lastErr == nil || errors.As(err, &status) {
			lastErr = err
		}
		nextRead, gap = time.Now().Add(gap), 2*gap
		return watched(), nil
	})
	log := a.log.WithValues("daemonSet", a.cfg.DaemonSet, "tries", tries)
	if err != nil {
		// Not a failure of the agent: the decision a read error leads to, logged as such.
		log.Info("Stopping", "decision", "restart", "reason", "the DaemonSet could not be read and was not seen deleted; only NotFound or a deletion timestamp mean an uninstall",
			"watched", a.daemonSetWatch.seen().String(), "err", fmt.Sprint(lastErr))
		return false
	}
	if !state.uninstalled() {
		log.Info("Stopping", "decision", "restart", "reason", reason)
		return false
	}
	log.Info("Stopping", "decision", "uninstall", "reason", reason)
	return true
}

// isUninstalling is the announcers' view of the decision taken at exit
// (announcerDeps.uninstalling).
func (a *agent) isUninstalling() bool { return a.uninstalling }

// removeRules removes every chain and table the agent installed (both modes, as --cleanup),
// once its consumers have stopped; the logger is the agent's.
func (a *agent) removeRules() error {
	ctx, cancel := context.WithTimeout(logr.NewContext(context.Background(), a.log), uninstallCleanupTimeout)
	defer cancel()
	return cleanup(ctx, a.cfg)
}
