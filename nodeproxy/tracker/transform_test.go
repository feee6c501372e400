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
