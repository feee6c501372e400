package aws

import (
	"context"
	"errors"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// apiCalls measures AWS API operations by service and operation: how many (by outcome, "ok" or
// the AWS error code, "error" when there is none), how long each took in all (its retries and
// rate-limit waits included), how many retries the SDK made and how long the client-side rate
// limit held them (throttle.go).
type apiCalls struct {
	vec       *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	retries   *prometheus.CounterVec
	throttled *prometheus.CounterVec
}

func newAPICalls(reg prometheus.Registerer) (*apiCalls, error) {
	labels := []string{"service", "operation"}
	a := &apiCalls{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_aws_api_calls_total",
			Help: "AWS API operations made by the AWS provider, by service, operation and outcome (ok or the AWS error code).",
		}, append(labels, "outcome")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portico_aws_api_call_duration_seconds",
			Help:    "Time of one AWS API operation, its retries and client-side rate-limit waits included, by service and operation.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_aws_api_retries_total",
			Help: "Retries the AWS SDK made of failed attempts (throttling, transient errors), by service and operation.",
		}, labels),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_aws_api_throttle_wait_seconds_total",
			Help: "Time AWS API attempts waited for the client-side rate limit (--aws-api-throttle), by service and operation.",
		}, labels),
	}
	var err error
	if a.vec, err = register(reg, a.vec); err != nil {
		return nil, err
	}
	if a.latency, err = register(reg, a.latency); err != nil {
		return nil, err
	}
	if a.retries, err = register(reg, a.retries); err != nil {
		return nil, err
	}
	if a.throttled, err = register(reg, a.throttled); err != nil {
		return nil, err
	}
	return a, nil
}

// register registers c with reg (nil: nothing), or returns the collector registered before
// under the same name (several providers in one process share the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return c, err
		}
		existing, ok := are.ExistingCollector.(C)
		if !ok {
			return c, err
		}
		return existing, nil
	}
	return c, nil
}

// middleware returns the SDK stack hook that measures each operation once, after its retries.
func (a *apiCalls) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("PorticoCallCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, metadataOut, error) {
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			a.latency.WithLabelValues(svc, op).Observe(time.Since(start).Seconds())
			if res, ok := retry.GetAttemptResults(md); ok && len(res.Results) > 1 {
				a.retries.WithLabelValues(svc, op).Add(float64(len(res.Results) - 1))
			}
			outcome := "ok"
			if err != nil {
				outcome = "error"
				var ae smithy.APIError
				if errors.As(err, &ae) {
					outcome = ae.ErrorCode()
				}
			}
			a.vec.WithLabelValues(svc, op, outcome).Inc()
			return out, md, err
		}), middleware.After)
}

type metadataOut = middleware.Metadata
