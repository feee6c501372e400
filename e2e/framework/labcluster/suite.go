package labcluster

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/portico-lb/portico/internal/prereq"
)

// Suite is the life of a suite's one shared environment: started by the first test that needs
// it (Setup), torn down after the last (Main).
type Suite struct {
	once sync.Once
	err  error
}

// Setup fails tb, naming the fix, without root or the packages the suite needs (or skips it,
// with PORTICO_SKIP_PRIVILEGED=1); then runs start once for the whole package and fails tb with
// its error, on this and every later call.
func (s *Suite) Setup(tb testing.TB, start func() error, needs ...prereq.Package) {
	tb.Helper()
	prereq.RequireRoot(tb, needs...)
	s.once.Do(func() { s.err = start() })
	if s.err != nil {
		tb.Fatal(s.err)
	}
}

// Main is the suite's TestMain: it runs the tests, then teardown (stopping what the suite
// started and closing its Env; printed, not fatal, when it fails), and exits with the tests' code.
func (s *Suite) Main(m *testing.M, teardown func() error) {
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
