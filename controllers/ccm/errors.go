package ccm

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cloud-provider/api"

	"github.com/portico-lb/portico/providers"
)

// InvalidServiceError reports a Service the adapter cannot build a load balancer for. Its
// message lists every problem with its field path; the stock service controller puts it in a
// SyncLoadBalancerFailed (or UpdateLoadBalancerFailed) Event, so `kubectl describe svc` shows
// all of them at once.
type InvalidServiceError struct {
	// Service is namespace/name.
	Service string
	Errs    field.ErrorList
}

func (e *InvalidServiceError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	return fmt.Sprintf("invalid Service %s: %s", e.Service, strings.Join(msgs, "; "))
}

// cloudError is the one place where a provider error becomes an error for the stock service
// controller. A *providers.RetryError becomes an *api.RetryError, which the controller requeues
// after its fixed delay; anything else is wrapped with op and retried with the controller's
// exponential backoff (5s to 300s). The stock controller has no notion of a terminal error, so
// a *providers.InvalidError is retried too; its message names the Service field, and the
// Service's next change re-triggers a sync anyway.
func cloudError(err error, op string) error {
	var retry *providers.RetryError
	if errors.As(err, &retry) {
		return api.NewRetryError(op+": "+err.Error(), retry.After)
	}
	return fmt.Errorf("%s: %w", op, err)
}
