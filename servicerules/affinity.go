package servicerules

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultAffinityTimeout is Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds.
const DefaultAffinityTimeout = 10800 * time.Second

// AffinityTimeout is how long ClientIP session affinity holds for svc: its
// sessionAffinityConfig.clientIP.timeoutSeconds, else DefaultAffinityTimeout. It is 0 when svc has
// no ClientIP affinity.
func AffinityTimeout(svc *corev1.Service) time.Duration {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		return time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
	}
	return DefaultAffinityTimeout
}
