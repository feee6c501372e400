package aws

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// Client-side limits on the AWS API: a token bucket per throttle rule (golang.org/x/time/rate)
// that every attempt of a matching operation waits on, and the SDK's standard retryer with the
// configured number of retries and longest backoff. AWS throttles per account and region, so a
// cluster sharing an account with other tools keeps its own rate below the account's limits.

// ThrottleRule limits the operations of one AWS service whose names match Operation to Rate
// requests per second with bursts of Burst.
type ThrottleRule struct {
	// Service is the SDK service ID: "EC2", "Elastic Load Balancing" (Classic),
	// "Elastic Load Balancing v2".
	Service   string
	Operation *regexp.Regexp
	Rate      float64
	Burst     int
}

// String renders r as ParseThrottleRule reads it.
func (r ThrottleRule) String() string {
	return fmt.Sprintf("%s:%s=%s:%d", r.Service, r.Operation, strconv.FormatFloat(r.Rate, 'f', -1, 64), r.Burst)
}

// ParseThrottleRule reads "<service>:<operation regexp>=<rate>:<burst>", e.g.
// "Elastic Load Balancing v2:RegisterTargets|DeregisterTargets=4:20" (the form of the AWS Load
// Balancer Controller's --aws-api-throttle). The regexp must match the whole operation name.
func ParseThrottleRule(s string) (ThrottleRule, error) {
	lhs, rhs, ok := strings.Cut(s, "=")
	if !ok {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: want <service>:<operation regexp>=<rate>:<burst>", s)
	}
	svc, op, ok := strings.Cut(lhs, ":")
	svc, op = strings.TrimSpace(svc), strings.TrimSpace(op)
	if !ok || svc == "" || op == "" {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: want <service>:<operation regexp> before '='", s)
	}
	re, err := regexp.Compile("^(?:" + op + ")$")
	if err != nil {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: operation pattern: %w", s, err)
	}
	rs, bs, ok := strings.Cut(rhs, ":")
	if !ok {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: want <rate>:<burst> after '='", s)
	}
	r, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
	if err != nil || r <= 0 {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: rate must be a positive number of requests per second", s)
	}
	b, err := strconv.Atoi(strings.TrimSpace(bs))
	if err != nil || b < 1 {
		return ThrottleRule{}, fmt.Errorf("throttle rule %q: burst must be a positive integer", s)
	}
	return ThrottleRule{Service: svc, Operation: re, Rate: r, Burst: b}, nil
}

// throttle holds one limiter per rule; the first rule matching an operation applies.
type throttle struct {
	rules    []ThrottleRule
	limiters []*rate.Limiter
	calls    *apiCalls
}

func newThrottle(rules []ThrottleRule, calls *apiCalls) *throttle {
	t := &throttle{rules: rules, calls: calls}
	for _, r := range rules {
		t.limiters = append(t.limiters, rate.NewLimiter(rate.Limit(r.Rate), r.Burst))
	}
	return t
}

func (t *throttle) limiter(service, op string) *rate.Limiter {
	for i, r := range t.rules {
		if r.Service == service && r.Operation.MatchString(op) {
			return t.limiters[i]
		}
	}
	return nil
}

// middleware waits for a token before every attempt (it sits after the retry middleware, so
// retries are limited too) and counts the time waited.
func (t *throttle) middleware(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("PorticoThrottle",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			if l := t.limiter(svc, op); l != nil {
				start := time.Now()
				if err := l.Wait(ctx); err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("waiting for the client-side rate limit of %s %s: %w", svc, op, err)
				}
				if waited := time.Since(start); waited > time.Millisecond {
					t.calls.throttled.WithLabelValues(svc, op).Add(waited.Seconds())
				}
			}
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After)
}

// DefaultMaxRetries and DefaultMaxBackoff are the SDK standard retryer's defaults (3 attempts,
// backoff up to 20 s).
const (
	DefaultMaxRetries = 2
	DefaultMaxBackoff = 20 * time.Second
)

// retryer is the SDK's standard retryer (exponential backoff with jitter, a retry token bucket,
// throttling and transient errors retried) with maxRetries retries and backoff up to maxBackoff.
func retryer(maxRetries int, maxBackoff time.Duration) func() aws.Retryer {
	return func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxRetries + 1
			o.MaxBackoff = maxBackoff
		})
	}
}
