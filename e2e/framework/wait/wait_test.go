package wait_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

func TestPollSucceedsOnceTheStateHolds(t *testing.T) {
	calls := 0
	err := wait.Poll(context.Background(), time.Millisecond, 5*time.Second, "three calls", func(context.Context) error {
		calls++
		if calls < 3 {
			return fmt.Errorf("only %d calls", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollTimeoutNamesWhatAndLastError(t *testing.T) {
	begin := time.Now()
	err := wait.Poll(context.Background(), 5*time.Millisecond, 100*time.Millisecond, "the VIP", func(context.Context) error {
		return errors.New("neighbour is node2")
	})
	if err == nil {
		t.Fatal("Poll of a false condition succeeded")
	}
	if d := time.Since(begin); d < 100*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", d)
	}
	for _, want := range []string{"waiting for the VIP", "100ms", "neighbour is node2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestStopEndsAtOnce(t *testing.T) {
	exited := errors.New("controller exited")
	begin := time.Now()
	calls := 0
	err := wait.Poll(context.Background(), time.Millisecond, time.Minute, "ingress", func(context.Context) error {
		calls++
		return wait.Stop(exited)
	})
	if !errors.Is(err, exited) || calls != 1 || time.Since(begin) > 5*time.Second {
		t.Fatalf("Poll = %v after %d calls and %v; want the stop error at once", err, calls, time.Since(begin))
	}
	if !strings.Contains(err.Error(), "waiting for ingress") {
		t.Errorf("error %q does not name what was awaited", err)
	}
}

func TestAdapters(t *testing.T) {
	if wait.True(func() bool { return true })() != nil || wait.True(func() bool { return false })() == nil {
		t.Error("True adapts wrongly")
	}
	if wait.Reason(func() string { return "" })() != nil {
		t.Error("Reason of \"\" is an error")
	}
	if err := wait.Reason(func() string { return "no ingress" })(); err == nil || err.Error() != "no ingress" {
		t.Errorf("Reason = %v", err)
	}
}

// fakeTB records Fatal without ending the test.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Fatal(args ...any) { f.msg = fmt.Sprint(args...) }

func TestForFailsWithDumps(t *testing.T) {
	f := &fakeTB{TB: t}
	wait.For(f, 50*time.Millisecond, "the route", func() error { return errors.New("no route") }, func() string { return "bird log" })
	for _, want := range []string{"waiting for the route", "no route", "bird log"} {
		if !strings.Contains(f.msg, want) {
			t.Errorf("failure %q does not contain %q", f.msg, want)
		}
	}
	f.msg = ""
	wait.For(f, time.Second, "x", func() error { return nil })
	if f.msg != "" {
		t.Errorf("a holding condition failed: %s", f.msg)
	}
}
