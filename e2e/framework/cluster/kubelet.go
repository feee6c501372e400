package cluster

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// There is no kubelet in a test cluster: these helpers play its part, so that the real
// EndpointSlice controller sees registered, Ready Nodes and Running, Ready Pods with IPs.

// NodeSpec describes a Node to register.
type NodeSpec struct {
	Name        string
	InternalIPs []netip.Addr
	Labels      map[string]string
	PodCIDRs    []netip.Prefix
	// NotReady registers the node with Ready=False.
	NotReady bool
}

// RegisterNode creates (or updates) a Node and sets its status: addresses and the Ready condition.
func (c *Cluster) RegisterNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: spec.Labels}}
	for _, p := range spec.PodCIDRs {
		node.Spec.PodCIDRs = append(node.Spec.PodCIDRs, p.String())
	}
	if len(node.Spec.PodCIDRs) > 0 {
		node.Spec.PodCIDR = node.Spec.PodCIDRs[0]
	}
	nodes := c.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, spec.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", spec.Name, err)
	}
	ready := corev1.ConditionTrue
	if spec.NotReady {
		ready = corev1.ConditionFalse
	}
	now := metav1.Now()
	created.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: "PorticoTestHarness",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: spec.Name}}
	for _, ip := range spec.InternalIPs {
		created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	updated, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("setting node %s status: %w", spec.Name, err)
	}
	return updated, nil
}

// CreateReadyPod creates pod bound to nodeName and marks it Running and Ready with ips, as a
// kubelet would once its containers started.
func (c *Cluster) CreateReadyPod(ctx context.Context, pod *corev1.Pod, nodeName string, ips ...netip.Addr) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.Spec.NodeName = nodeName
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "portico.invalid/none"}}
	}
	created, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return c.SetPodReady(ctx, created, true, ips...)
}

// SetPodReady sets pod's status to Running with ips and the Ready condition to ready.
func (c *Cluster) SetPodReady(ctx context.Context, pod *corev1.Pod, ready bool, ips ...netip.Addr) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	if len(ips) > 0 {
		pod.Status.PodIP = ips[0].String()
		pod.Status.PodIPs = nil
		for _, ip := range ips {
			pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip.String()})
		}
	}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = nil
	for _, ctr := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, Ready: ready, Started: &ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	updated, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("setting pod %s/%s status: %w", pod.Namespace, pod.Name, err)
	}
	return updated, nil
}

// StartTerminating deletes pod with a grace period. With no kubelet to confirm the deletion the
// Pod stays, with a deletion timestamp, until ForceDelete: the state of a terminating Pod.
func (c *Cluster) StartTerminating(ctx context.Context, namespace, name string) error {
	grace := int64(3600)
	return c.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

// ForceDelete removes a pod at once, as a kubelet does once the containers stopped.
func (c *Cluster) ForceDelete(ctx context.Context, namespace, name string) error {
	zero := int64(0)
	err := c.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// EnsureNamespace creates a namespace and its default ServiceAccount (which Pod admission
// requires) if they do not exist, without waiting for the serviceaccount controller.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	_, err = c.client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating default service account in %s: %w", name, err)
	}
	return nil
}
