package tracker

import (
	"sync"

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
//
// A slice's endpoints are most of the caches' memory at scale (100,000 endpoints at 10,000
// Services x 10 took 50 of the agent's 79 MB of live heap), so they are compacted (compact).
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
		compact(o)
	case *corev1.Node:
		o.ManagedFields = nil
		o.Annotations = nil
		o.Status.Images = nil
	}
	return obj, nil
}

// compact shrinks a slice's endpoints without changing what the agent reads: the array
// is cut to its length (the decoder grows it by doubling: 16 places for 10 endpoints), the
// fields no reader uses are dropped (hostname, targetRef, deprecatedTopology, the endpoint's
// own zone: topology reads the hints), and the condition and node name pointers are shared
// (interned) instead of one allocation each. Cached objects are read-only to every reader, so
// sharing the pointed-to values is safe.
func compact(s *discoveryv1.EndpointSlice) {
	if cap(s.Endpoints) > len(s.Endpoints) {
		eps := make([]discoveryv1.Endpoint, len(s.Endpoints))
		copy(eps, s.Endpoints)
		s.Endpoints = eps
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		e.Hostname, e.TargetRef, e.DeprecatedTopology, e.Zone = nil, nil, nil, nil
		e.Conditions.Ready = sharedBool(e.Conditions.Ready)
		e.Conditions.Serving = sharedBool(e.Conditions.Serving)
		e.Conditions.Terminating = sharedBool(e.Conditions.Terminating)
		e.NodeName = nodeNames.intern(e.NodeName)
	}
}

var boolTrue, boolFalse = true, false

// sharedBool is a pointer to the same value as p that every endpoint shares; nil stays nil.
func sharedBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return &boolTrue
	default:
		return &boolFalse
	}
}

// nodeNames interns endpoints' node names: one string per node for all the endpoints on it.
// It only grows, by a node name and a pointer per node ever seen, which a cluster's node
// churn keeps small.
var nodeNames = &interner{m: map[string]*string{}}

type interner struct {
	mu sync.Mutex
	m  map[string]*string
}

func (in *interner) intern(p *string) *string {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if q, ok := in.m[*p]; ok {
		return q
	}
	in.m[*p] = p
	return p
}
