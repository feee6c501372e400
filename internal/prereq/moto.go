package prereq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MotoVersion is the pinned version of moto (PyPI moto[server]) that the AWS suites run.
const MotoVersion = "5.2.5"

// MotoRequirement is the pip requirement `make prereqs` installs.
const MotoRequirement = "moto[server]==" + MotoVersion

// MotoServerEnv names the variable that points the AWS suites at a moto_server installed
// elsewhere; `make prereqs` then only checks that it is executable.
const MotoServerEnv = "PORTICO_MOTO_SERVER"

// CacheDir is where Portico caches what it builds or installs: $PORTICO_CACHE, else
// $XDG_CACHE_HOME/portico, else ~/.cache/portico (the rule of e2e/k8sbin.DefaultCacheDir).
func (m Machine) CacheDir() string {
	if d := m.Getenv("PORTICO_CACHE"); d != "" {
		return d
	}
	if d := m.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "portico")
	}
	if h := m.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "portico")
	}
	return filepath.Join(os.TempDir(), "portico-cache")
}

// CacheDir is Host().CacheDir().
func CacheDir() string { return Host().CacheDir() }

// MotoVenv is the virtual environment `make prereqs` installs moto into:
// <cache>/moto-<version>.
func (m Machine) MotoVenv() string {
	return filepath.Join(m.CacheDir(), "moto-"+MotoVersion)
}

// MotoServerPath returns the moto_server to run: $PORTICO_MOTO_SERVER if set, else
// <cache>/moto-<version>/bin/moto_server.
func (m Machine) MotoServerPath() string {
	if p := m.Getenv(MotoServerEnv); p != "" {
		return p
	}
	return filepath.Join(m.MotoVenv(), "bin", "moto_server")
}

// MotoInstalled reports whether the installation MotoServerPath names is complete: an
// executable moto_server and, in the cache's virtual environment, the pinned moto's metadata
// and a python that still runs (its base interpreter may have been removed since).
func (m Machine) MotoInstalled() bool {
	if !m.IsExecutable(m.MotoServerPath()) {
		return false
	}
	if m.Getenv(MotoServerEnv) != "" {
		return true
	}
	venv := m.MotoVenv()
	dist, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "moto-"+MotoVersion+".dist-info"))
	return len(dist) > 0 && m.IsExecutable(filepath.Join(venv, "bin", "python"))
}

// MotoServer returns the moto_server to run, or an error naming how to install it.
func (m Machine) MotoServer() (string, error) {
	p := m.MotoServerPath()
	if m.MotoInstalled() {
		return p, nil
	}
	if m.Getenv(MotoServerEnv) != "" {
		return "", fmt.Errorf("%s=%s is not an executable file; unset it to use the one `make prereqs` installs", MotoServerEnv, p)
	}
	return "", fmt.Errorf("moto's server (%s) is not installed at %s. Fix: run `make prereqs` (or %s)", MotoRequirement, p, m.MotoInstallCommand("python3"))
}

// MotoInstallCommand is the shell command that installs moto by hand with python.
func (m Machine) MotoInstallCommand(python string) string {
	venv := m.MotoVenv()
	return fmt.Sprintf("`%s -m venv %s && %s/bin/pip install '%s'`", python, venv, venv, MotoRequirement)
}

// RequireMoto returns the moto_server to run, or fails tb naming the fix.
func RequireMoto(tb testing.TB) string {
	tb.Helper()
	p, err := Host().MotoServer()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// MotoPython returns a python3 that can create virtual environments, preferring Debian's
// /usr/bin/python3 (which outlives version managers) over the first python3 on PATH, or "".
func (m Machine) MotoPython() string {
	candidates := []string{"/usr/bin/python3"}
	if p, err := m.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, py := range candidates {
		if !m.IsExecutable(py) {
			continue
		}
		// Debian's python3 lacks ensurepip, which venv needs, until python3-venv is installed.
		if exec.Command(py, "-c", "import venv, ensurepip").Run() == nil {
			return py
		}
	}
	return ""
}
