package prereq

import (
	"fmt"
	"strings"
	"testing"
)

// verdict is what a test does about its prerequisites.
type verdict int

const (
	run verdict = iota
	skip
	fail
)

// decideRoot says whether a test that needs root and pkgs runs, is skipped (only when the user
// opted in) or fails, with the message to give.
func (m Machine) decideRoot(pkgs []Package) (verdict, string) {
	err := m.Check(true, pkgs...)
	if err == nil {
		return run, ""
	}
	if m.SkipPrivileged() {
		return skip, fmt.Sprintf("skipped (%s=1): %s", SkipPrivilegedEnv, AsMissing(err).Problem())
	}
	return fail, fmt.Sprintf("needs root and the Debian packages %s. %v Or set %s=1 to skip such tests.",
		strings.ReplaceAll(PackageNames(pkgs), " ", ", "), err, SkipPrivilegedEnv)
}

// RequireRoot fails tb unless this process is root and the commands of pkgs are on PATH; the
// message names what is missing and the command that fixes it. With PORTICO_SKIP_PRIVILEGED=1
// it skips tb instead.
func RequireRoot(tb testing.TB, pkgs ...Package) {
	tb.Helper()
	switch v, msg := Host().decideRoot(pkgs); v {
	case skip:
		tb.Skip(msg)
	case fail:
		tb.Fatal(msg)
	}
}
