package dataplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCreateRetrying(t *testing.T) {
	defer func(p time.Duration) { createRetryPause = p }(createRetryPause)
	createRetryPause = time.Millisecond
	svc := schema.GroupResource{Resource: "services"}
	timeout := apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	for _, c := range []struct {
		name    string
		results []error // what each call returns, the last one repeated
		calls   int
		wantErr bool
	}{
		{"created", []error{nil}, 1, false},
		{"timeouts, then created", []error{timeout, timeout, nil}, 3, false},
		{"timeout, then created by the timed-out request", []error{timeout, apierrors.NewAlreadyExists(svc, "s1")}, 2, false},
		{"exists without a timeout", []error{apierrors.NewAlreadyExists(svc, "s1")}, 1, true},
		{"refused", []error{apierrors.NewBadRequest("no")}, 1, true},
		{"overloaded, then created", []error{apierrors.NewTooManyRequests("busy", 1), nil}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := createRetrying(context.Background(), func() error {
				r := c.results[min(calls, len(c.results)-1)]
				calls++
				return r
			})
			if (err != nil) != c.wantErr || calls != c.calls {
				t.Errorf("err %v after %d calls, want error %v after %d", err, calls, c.wantErr, c.calls)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := createRetrying(ctx, func() error { return timeout }); !errors.Is(err, timeout) {
		t.Errorf("cancelled: %v, want the timeout", err)
	}
}
