package tracker

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// strip is the informers' transform: before an object reaches a cache (and the event handlers)
// it drops what the agent never reads, which the caches would otherwise keep for every object:
// managedFields everywhere (often larger than the spec), kubectl's last-applied-configuration
// copy of a Service, an EndpointSlice's annotations but the trigger time (Trigger), a Node's
// annotations and image list. Every reader of the caches (the proxiers, health checks,
// announcers, membership) reads Services' spec, status, labels and annotations (source ranges),
// slices' endpoints, ports and labels, and Nodes' labels, addresses, conditions, taints and
// deletion. It changes the object in place and may see one twice: it is idempotent.
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		o.ManagedFields = nil
		delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
	case *discoveryv1.EndpointSlice:
		o.ManagedFields = nil
		if v, ok := o.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok && len(o.Annotations) > 1 {
			o.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: v}
		} else if !ok {
			o.Annotations = nil
		}
	case *corev1.Node:
		o.ManagedFields = nil
		o.Annotations = nil
		o.Status.Images = nil
	}
	return obj, nil
}
