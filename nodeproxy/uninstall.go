package nodeproxy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// How a stopping agent tells an uninstall from a restart.
//
// A DaemonSet's pods stop for two reasons that look alike from inside: the pod is replaced
// (helm upgrade, a rolling update, a deleted pod, a restart), and the next agent takes over the
// rules, announcements and membership where this one left them; or the agent is uninstalled
// (helm uninstall, kubectl delete), and nothing will ever take over. The garbage collector
// deletes the pods of a DaemonSet only once the DaemonSet is gone or being deleted (cascading
// deletion), so an agent stopped by a signal reads its DaemonSet (--daemonset): gone, being
// deleted, or unreadable because its RBAC or ServiceAccount went first (helm uninstall deletes
// the Roles, bindings and ServiceAccount right after the DaemonSet, before the pods stop), it is
// an uninstall, and the agent withdraws every announcement, leaves membership and removes its
// rules (--uninstall-cleanup) before it exits. The check runs on every node whose agent runs
// at the time, including nodes that joined after the install. Any other error reading it (the
// API server unreachable) counts as a restart: rules that stay are the safe side, and
// `portico-agent --cleanup` removes them by hand.

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

// daemonSetDeployed reads the DaemonSet ref ("namespace/name") and reports whether the agent is
// still deployed: it exists and is not being deleted. NotFound, Forbidden and Unauthorized
// report false (an uninstall, see above); other errors are returned. A malformed ref, or no
// client, gives nil: nothing to check.
func daemonSetDeployed(cs kubernetes.Interface, ref string) func(context.Context) (bool, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || cs == nil {
		return nil
	}
	return func(ctx context.Context) (bool, error) {
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("getting DaemonSet %s: %w", ref, err)
		}
		return ds.DeletionTimestamp == nil, nil
	}
}

// uninstallingAt reports whether the agent, now stopping, is being uninstalled: it was told to
// stop (signalled; an agent failing on its own is restarted by its kubelet) and its DaemonSet
// is no longer deployed (a.deployed). A failed read is tried again for up to budget; without
// --daemonset, or when no read succeeds, it is not. The outcome is logged either way, the
// line a user (and the install suite) reads to learn why the rules went or stayed.
func (a *agent) uninstallingAt(signalled bool, budget time.Duration) bool {
	if !signalled || a.deployed == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var deployed bool
	var lastErr error
	tries := 0
	err := wait.PollUntilContextCancel(ctx, uninstallCheckEvery, true, func(ctx context.Context) (bool, error) {
		tries++
		rctx, cancel := context.WithTimeout(ctx, uninstallCheckTimeout)
		defer cancel()
		d, err := a.deployed(rctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		deployed = d
		return true, nil
	})
	if err != nil {
		a.log.Error(lastErr, "Cannot tell whether the agent is being uninstalled; stopping as for a restart (rules and announcements stay)", "daemonSet", a.cfg.DaemonSet, "tries", tries)
		return false
	}
	if deployed {
		a.log.Info("The agent's DaemonSet is deployed: stopping as for a restart", "daemonSet", a.cfg.DaemonSet, "tries", tries)
	} else {
		a.log.Info("The agent's DaemonSet is gone, being deleted or unreadable: uninstalling", "daemonSet", a.cfg.DaemonSet, "tries", tries)
	}
	return !deployed
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
