package service

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ConditionReady is the Service condition Portico maintains on every Service it owns.
const ConditionReady = "portico-lb.io/LoadBalancerReady"

// Condition reasons.
const (
	ReasonProvisioned   = "Provisioned"
	ReasonInvalidSpec   = "InvalidSpec"
	ReasonProviderError = "ProviderError"
	ReasonPending       = "Pending"
	// ReasonClassNotServed: the instance holding the Service does not serve its class any
	// more; the load balancer is kept (Ownership).
	ReasonClassNotServed = "ClassNotServed"
)

// Event reasons (the upstream service controller's, plus InvalidSpec).
const (
	EventEnsuring     = "EnsuringLoadBalancer"
	EventEnsured      = "EnsuredLoadBalancer"
	EventSyncFailed   = "SyncLoadBalancerFailed"
	EventDeleting     = "DeletingLoadBalancer"
	EventDeleted      = "DeletedLoadBalancer"
	EventDeleteFailed = "DeleteLoadBalancerFailed"
	EventNoNodes      = "UnAvailableLoadBalancer"
	EventInvalidSpec  = "InvalidSpec"
	// EventClassNotServed: as ReasonClassNotServed.
	EventClassNotServed = "ClassNotServed"
	// EventSettingIgnored: the provider accepted the Service but ignores a setting (e.g. an
	// annotation that does not apply to the chosen kind of load balancer).
	EventSettingIgnored  = "SettingIgnored"
	eventActionEnsure    = "Ensure"
	eventActionDelete    = "Delete"
	eventActionValidate  = "Validate"
	eventActionSelectNod = "SelectNodes"
)

// setCondition sets Portico's condition on status and reports whether anything changed.
func setCondition(status *corev1.ServiceStatus, generation int64, ok bool, reason, message string) bool {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	if len(message) > 32000 {
		message = message[:32000]
	}
	return meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: ConditionReady, Status: st, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// setLoadBalancerStatus replaces status.loadBalancer and reports whether it changed.
func setLoadBalancerStatus(status *corev1.ServiceStatus, lb corev1.LoadBalancerStatus) bool {
	if equality.Semantic.DeepEqual(status.LoadBalancer, lb) {
		return false
	}
	status.LoadBalancer = lb
	return true
}

// errorListMessage renders a field.ErrorList as one line per problem.
func errorListMessage(errs field.ErrorList) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}
