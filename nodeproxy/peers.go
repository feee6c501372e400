package nodeproxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Which Nodes are membership peers.
//
// An agent joins, and while settling presumes alive, only the Nodes that run an agent: the
// Nodes where a pod of its own DaemonSet (--daemonset) is scheduled. Those are exactly the
// Nodes the DaemonSet controller found the pod fits (nodeSelector, affinity, tolerations),
// as it found them, so no second copy of its rules runs here; Windows nodes, virtual nodes and
// nodes outside the selector have no such pod and are never dialled. A scheduled pod whose
// agent has not started yet, or a node that is off, is still a peer: joins run in the
// background and are retried with back-off, and such a node is presumed alive only while the
// agent settles. The pods are watched in the DaemonSet's namespace (the agent's RBAC: pods
// list and watch there, nothing cluster-wide), stripped to their owner, node and phase.
// Without --daemonset, or when the agent may not list those pods (an older RBAC), every Node
// is a peer, as before.

// agentPods watches the pods of the agent's DaemonSet.
type agentPods struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	start           func(stop <-chan struct{})
}

// newAgentPods returns the watch of the pods of DaemonSet ref ("namespace/name"), or nil (every
// Node is a peer) without a ref or a client, or when listing those pods fails (logged by the
// caller through the returned error).
func newAgentPods(ctx context.Context, cs kubernetes.Interface, ref string) (*agentPods, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || cs == nil {
		return nil, nil
	}
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("listing the pods of DaemonSet %s: %w", ref, err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, podResync, informers.WithNamespace(ns), informers.WithTransform(stripPod))
	return &agentPods{namespace: ns, name: name, informer: f.Core().V1().Pods().Informer(), start: f.Start}, nil
}

// podResync is how often the pod informer replays its cache (the tracker's period).
const podResync = 15 * time.Minute

// stripPod keeps what agentNodes reads: the pod's name, owners, node and phase.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion, OwnerReferences: p.OwnerReferences},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// nodes returns the names of the Nodes with a pod of the DaemonSet.
func (ap *agentPods) nodes() map[string]bool {
	var pods []*corev1.Pod
	for _, o := range ap.informer.GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return agentNodes(pods, ap.name)
}

// agentNodes names the Nodes where a pod controlled by DaemonSet ds is scheduled and not
// finished.
func agentNodes(pods []*corev1.Pod, ds string) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		c := metav1.GetControllerOf(p)
		if c == nil || c.Kind != "DaemonSet" || c.Name != ds || p.Spec.NodeName == "" ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Spec.NodeName] = true
	}
	return out
}

// peerNodes are the Nodes other than self with an InternalIP of bind's family, only those in
// withAgent unless it is nil, each with those InternalIPs.
func peerNodes(nodes []*corev1.Node, withAgent map[string]bool, self string, bind netip.Addr) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for _, n := range nodes {
		if n.Name == self || (withAgent != nil && !withAgent[n.Name]) {
			continue
		}
		for _, ip := range internalIPs(n) {
			if ip.Is4() == bind.Is4() {
				out[n.Name] = append(out[n.Name], ip)
			}
		}
	}
	return out
}

// peers returns the other Nodes that run an agent (every other Node without agentPods), with
// their InternalIPs of bind's family: the members to join.
func (a *agent) peers(bind netip.Addr) map[string][]netip.Addr {
	nodes, _ := a.tracker.Store().Nodes()
	var withAgent map[string]bool
	if a.agentPods != nil {
		withAgent = a.agentPods.nodes()
	}
	return peerNodes(nodes, withAgent, a.cfg.NodeName, bind)
}
