package tracker

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStrip: the transform keeps what the agent reads (a Service's other annotations, an
// EndpointSlice's trigger time, a Node's labels and addresses) and drops the rest; twice is
// the same as once.
func TestStrip(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf, Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: "{...}", "service.beta.kubernetes.io/load-balancer-source-ranges": "198.18.0.0/15"}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf, Annotations: map[string]string{
		corev1.EndpointsLastChangeTriggerTime: "2026-01-02T03:04:05Z", "other": "x"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.19.1.2"}}}}
	untriggered := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"other": "x"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf, Labels: map[string]string{"zone": "a"},
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.19.0.11"}},
			Images: []corev1.ContainerImage{{Names: []string{"portico.invalid/echo"}}}}}
	for range 2 {
		for _, o := range []any{svc, slice, untriggered, node} {
			if _, err := strip(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if svc.ManagedFields != nil || !maps.Equal(svc.Annotations, map[string]string{"service.beta.kubernetes.io/load-balancer-source-ranges": "198.18.0.0/15"}) {
		t.Errorf("Service after strip: managedFields %v, annotations %v", svc.ManagedFields, svc.Annotations)
	}
	if slice.ManagedFields != nil || !maps.Equal(slice.Annotations, map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-02T03:04:05Z"}) || len(slice.Endpoints) != 1 {
		t.Errorf("EndpointSlice after strip: managedFields %v, annotations %v, endpoints %v", slice.ManagedFields, slice.Annotations, slice.Endpoints)
	}
	if untriggered.Annotations != nil {
		t.Errorf("EndpointSlice without a trigger time kept annotations %v", untriggered.Annotations)
	}
	if node.ManagedFields != nil || node.Annotations != nil || node.Status.Images != nil || node.Labels["zone"] != "a" || len(node.Status.Addresses) != 1 {
		t.Errorf("Node after strip: %+v", node)
	}
}

// TestCompactEndpoints: the transform keeps what the agent reads of each endpoint (addresses,
// conditions, node name, hints) with the same values, drops the rest, cuts the array to its
// length and shares the node names and conditions between endpoints.
func TestCompactEndpoints(t *testing.T) {
	yes, no := true, false
	node1, node1b := "node1", "node1"
	hints := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}}}
	eps := make([]discoveryv1.Endpoint, 2, 16)
	eps[0] = discoveryv1.Endpoint{Addresses: []string{"198.19.1.2"}, NodeName: &node1, Hints: hints,
		Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
		Hostname:   ptrTo("h"), Zone: ptrTo("a"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p"},
		DeprecatedTopology: map[string]string{"k": "v"}}
	eps[1] = discoveryv1.Endpoint{Addresses: []string{"198.19.1.3"}, NodeName: &node1b,
		Conditions: discoveryv1.EndpointConditions{Ready: &no}}
	slice := &discoveryv1.EndpointSlice{Endpoints: eps}
	for range 2 {
		if _, err := strip(slice); err != nil {
			t.Fatal(err)
		}
	}
	got := slice.Endpoints
	if len(got) != 2 || cap(got) != 2 {
		t.Fatalf("endpoints: len %d cap %d, want 2 and 2", len(got), cap(got))
	}
	e0, e1 := got[0], got[1]
	if e0.Addresses[0] != "198.19.1.2" || *e0.NodeName != "node1" || e0.Hints != hints ||
		!*e0.Conditions.Ready || !*e0.Conditions.Serving || *e0.Conditions.Terminating {
		t.Errorf("endpoint 0 lost what the agent reads: %+v", e0)
	}
	if e0.Hostname != nil || e0.Zone != nil || e0.TargetRef != nil || e0.DeprecatedTopology != nil {
		t.Errorf("endpoint 0 kept unread fields: %+v", e0)
	}
	if e1.Addresses[0] != "198.19.1.3" || *e1.Conditions.Ready || e1.Conditions.Serving != nil || e1.Conditions.Terminating != nil {
		t.Errorf("endpoint 1: %+v", e1)
	}
	if e0.NodeName != e1.NodeName {
		t.Error("the two endpoints on node1 do not share their node name")
	}
	if e0.Conditions.Ready != e0.Conditions.Serving || e0.Conditions.Terminating != e1.Conditions.Ready {
		t.Error("equal conditions are not shared")
	}
}

func ptrTo[T any](v T) *T { return &v }
