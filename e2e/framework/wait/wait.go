// Package wait is how end-to-end tests wait for the state they mean: poll a condition until it
// holds, with a deadline and a failure message that says what was awaited and what was last
// seen. It is a thin layer over k8s.io/apimachinery/pkg/util/wait.
package wait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// Interval is the default polling interval.
const Interval = 100 * time.Millisecond

// stopError ends polling at once (see Stop).
type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// Stop wraps err so that a condition returning it ends the wait at once with that error: for
// states that cannot turn good (the process under test exited).
func Stop(err error) error { return stopError{err} }

// Poll calls cond every interval (at once first) until it returns nil, returns a Stop error,
// ctx ends or timeout passes. The error names what and the condition's last error.
func Poll(ctx context.Context, interval, timeout time.Duration, what string, cond func(context.Context) error) error {
	var last error
	err := kwait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		var stop stopError
		if errors.As(last, &stop) {
			return false, stop.err
		}
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last != nil && errors.Is(err, last) {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	if last != nil {
		return fmt.Errorf("waiting for %s: not within %v: last: %w", what, timeout, last)
	}
	return fmt.Errorf("waiting for %s: %w", what, err)
}

// For waits up to timeout for cond to return nil, polling every Interval, and fails tb
// (Fatal) with what, the last error and the output of each dump (process logs, say).
func For(tb testing.TB, timeout time.Duration, what string, cond func() error, dumps ...func() string) {
	tb.Helper()
	err := Poll(context.Background(), Interval, timeout, what, func(context.Context) error { return cond() })
	if err == nil {
		return
	}
	msg := err.Error()
	for _, d := range dumps {
		msg += "\n" + d()
	}
	tb.Fatal(msg)
}

// True adapts a boolean condition: its error says only that it did not hold.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New("condition false")
	}
}

// Reason adapts a condition that reports why it does not hold yet ("" when it holds).
func Reason(cond func() string) func() error {
	return func() error {
		if why := cond(); why != "" {
			return errors.New(why)
		}
		return nil
	}
}
