package aws

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// apiCalls counts AWS API operations (not attempts: the SDK's retries happen below) by service,
// operation and outcome ("ok" or the AWS error code, "error" when there is none).
type apiCalls struct {
	vec *prometheus.CounterVec
}

func newAPICalls(reg prometheus.Registerer) (*apiCalls, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portico_aws_api_calls_total",
		Help: "AWS API operations made by the AWS provider, by service, operation and outcome (ok or the AWS error code).",
	}, []string{"service", "operation", "outcome"})
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			vec = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return &apiCalls{vec: vec}, nil
}

// middleware returns the SDK stack hook that counts each operation once, after its retries.
func (a *apiCalls) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("PorticoCallCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, metadataOut, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			outcome := "ok"
			if err != nil {
				outcome = "error"
				var ae smithy.APIError
				if errors.As(err, &ae) {
					outcome = ae.ErrorCode()
				}
			}
			a.vec.WithLabelValues(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), outcome).Inc()
			return out, md, err
		}), middleware.After)
}

type metadataOut = middleware.Metadata
