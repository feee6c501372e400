package providers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Provider provisions load balancers. It is declarative: Ensure receives the complete desired
// load balancer and converges to it (creating, updating or repairing drift), Get reads what
// exists, Delete removes everything the provider owns for a Service. A provider is never handed
// a Service object and never writes to the API server: ParseOptions reads the provider's own
// annotation keys, a pure step the controller takes before Ensure.
//
// Every method is idempotent and safe to call concurrently for different Refs.
type Provider interface {
	// Name is a short identifier, e.g. "aws" or "baremetal".
	Name() string
	// Capabilities is constant for the provider's life.
	Capabilities() Capabilities
	// ParseOptions reads the provider's own keys from a Service's annotations, strictly: its
	// typed options (handed back in LoadBalancer.Options) and every problem, each at
	// metadata.annotations[<key>] (annotations.ParseSection does both). Keys of other providers
	// are not its business. A provider without keys of its own returns nil, nil. It is pure.
	ParseOptions(annotations map[string]string) (ServiceOptions, field.ErrorList)
	// Ensure converges the load balancer to lb and returns its status.
	Ensure(ctx context.Context, lb *LoadBalancer) (Status, error)
	// Get returns the status of an existing load balancer, or ErrNotFound.
	Get(ctx context.Context, ref Ref) (Status, error)
	// Delete removes every resource owned for ref. Deleting what does not exist succeeds.
	Delete(ctx context.Context, ref Ref) error
}

// ErrNotFound is returned by Get when no load balancer exists for the Ref.
var ErrNotFound = errors.New("load balancer not found")

// InvalidError reports a desired load balancer the provider cannot serve as requested: bad or
// unsupported user input. It is terminal: retrying without a change to the Service cannot help.
type InvalidError struct {
	// Field is the Service field path (e.g. "spec.sessionAffinity" or
	// "metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-type]").
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Invalid returns an *InvalidError.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// RetryError asks for another call after a fixed delay instead of exponential backoff, for
// example while a cloud load balancer is still provisioning.
type RetryError struct {
	After  time.Duration
	Reason string
}

func (e *RetryError) Error() string { return fmt.Sprintf("%s (retry in %s)", e.Reason, e.After) }

// RetryAfter returns a *RetryError.
func RetryAfter(d time.Duration, format string, args ...any) error {
	return &RetryError{After: d, Reason: fmt.Sprintf(format, args...)}
}

// IsInvalid reports whether err is, or wraps, an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}
