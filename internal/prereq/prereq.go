// Package prereq owns the list of what the binaries, tests, demo and benchmarks need from the
// machine beyond Go: root, the external programs they run (Programs: each with its Debian
// package, or built by the project, and how it is found), the Debian packages derived from
// that list, moto's server and the cache directory. It says which command installs each. A
// test fails when Go code runs a program the list does not hold. `make prereqs` (e2e/tools/prereqs) checks and installs them; tests call
// RequireRoot or RequireMoto, which fail a test whose prerequisite is missing with a message
// naming the fix. A test is skipped instead only when the user asks for it with
// PORTICO_SKIP_PRIVILEGED=1, never silently.
//
// It lives outside e2e because unit packages (the iptables round trip of nodeproxy/rules) need
// it too, and nothing outside e2e imports e2e.
package prereq

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// SkipPrivilegedEnv names the variable that opts in to skipping, instead of failing, the tests
// that need root or the network-lab packages when those are missing. With everything present
// the tests run whatever it says.
const SkipPrivilegedEnv = "PORTICO_SKIP_PRIVILEGED"

// Package is a Debian package whose commands the tests or the build run. The packages are
// derived from Programs, the one list.
type Package struct {
	// Name is the Debian package name.
	Name string
	// Commands are the commands of the package that are run; the package counts as installed
	// when all are found (on PATH, or at the path when a command is an absolute path). Empty for python3-venv, which MotoPython checks.
	Commands []string
	// Privileged is set when only tests that run as root use the package, so that
	// PORTICO_SKIP_PRIVILEGED lets them be skipped without it.
	Privileged bool
}

// The packages, from Programs. Each is installed by `make prereqs` when missing (python3-venv
// only while moto is not installed).
var (
	// Git runs in make lint (git ls-files) and in go build, which stamps the commit.
	Git = debianPackage("git")
	// IPRoute2 builds the network labs (ip netns, veth pairs, bridges).
	IPRoute2 = debianPackage("iproute2")
	// IPTables is the agent's and kube-proxy's dataplane, both families.
	IPTables = debianPackage("iptables")
	// NFTables is nft(8): kube-proxy's nftables mode runs it, tests read portico-agent's table
	// with it (the agent itself talks netlink).
	NFTables = debianPackage("nftables")
	// Conntrack is conntrack(8), for reading a lab's connection tracking by hand; the agent
	// itself talks netlink.
	Conntrack = debianPackage("conntrack")
	// Bird2 is the BGP router the BGP suites run inside a lab namespace.
	Bird2 = debianPackage("bird2")
	// IPUtilsArping is arping, which the L2 suites ask who answers ARP for a VIP.
	IPUtilsArping = debianPackage("iputils-arping")
	// Procps is sysctl, which sets a lab router's forwarding and ECMP hash.
	Procps = debianPackage("procps")
	// Containerd, Runc and CNIPlugins run the containers of the kubelet nodes
	// (e2e/framework/nodes).
	Containerd = debianPackage("containerd")
	Runc       = debianPackage("runc")
	CNIPlugins = debianPackage("containernetworking-plugins")
	// Python3Venv lets Debian's python3 create the virtual environment moto is installed into.
	Python3Venv = debianPackage("python3-venv")
)

// Packages lists every package `make prereqs` installs, in the order Programs names them.
var Packages = installed()

// ImagePlatforms are the architectures (as GOARCH names them) `make push` builds the images
// for (internal/publish). The agent's image takes files from Debian packages of its
// architecture, which apt downloads only for an architecture dpkg knows: as root, `make
// prereqs` adds the missing ones as foreign architectures (dpkg --add-architecture) and
// updates apt's lists. That changes only what apt lists; no package of another architecture is
// installed.
var ImagePlatforms = []string{"amd64", "arm64"}

// MissingArchitectures returns those of want (Debian's names) that are neither dpkg's native
// architecture nor among its foreign ones.
func MissingArchitectures(want []string, native string, foreign []string) []string {
	var out []string
	for _, a := range want {
		if a != native && !slices.Contains(foreign, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// sbinDirs are where Debian puts administration commands; they are often not on a user's PATH.
var sbinDirs = []string{"/usr/sbin", "/sbin"}

// Machine is what the checks read of the machine. Host returns this one; tests use fakes.
type Machine struct {
	EUID         int
	LookPath     func(file string) (string, error)
	IsExecutable func(path string) bool
	Getenv       func(key string) string
}

// Host returns the machine this process runs on.
func Host() Machine {
	return Machine{EUID: os.Geteuid(), LookPath: exec.LookPath, IsExecutable: isExecutable, Getenv: os.Getenv}
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// SkipPrivileged reports whether the user opted in to skipping privileged tests whose
// prerequisites are missing (PORTICO_SKIP_PRIVILEGED=1, or true/yes).
func (m Machine) SkipPrivileged() bool {
	switch strings.ToLower(m.Getenv(SkipPrivilegedEnv)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// Missing is the error a check returns: what is missing, and how to fix it.
type Missing struct {
	// NotRoot is set when root is needed and this process is not root.
	NotRoot bool
	// Packages are not installed: a command of each is found nowhere.
	Packages []Package
	// Commands are those of Packages that were not found.
	Commands []string
	// OffPath are commands found only in a directory missing from PATH, e.g. /usr/sbin/ip.
	OffPath []string
}

// Check returns nil when this process is root (if root is true) and every command of pkgs is
// on PATH, else a *Missing.
func (m Machine) Check(root bool, pkgs ...Package) error {
	var miss Missing
	miss.NotRoot = root && m.EUID != 0
	for _, p := range pkgs {
		installed := true
		for _, c := range p.Commands {
			if filepath.IsAbs(c) {
				if !m.IsExecutable(c) {
					installed = false
					miss.Commands = append(miss.Commands, c)
				}
				continue
			}
			if _, err := m.LookPath(c); err == nil {
				continue
			}
			if off := m.offPath(c); off != "" {
				miss.OffPath = append(miss.OffPath, off)
				continue
			}
			installed = false
			miss.Commands = append(miss.Commands, c)
		}
		if !installed {
			miss.Packages = append(miss.Packages, p)
		}
	}
	if !miss.NotRoot && len(miss.Packages) == 0 && len(miss.OffPath) == 0 {
		return nil
	}
	return &miss
}

// offPath returns where command c is in an sbin directory that is not on PATH, or "".
func (m Machine) offPath(c string) string {
	for _, d := range sbinDirs {
		if p := filepath.Join(d, c); m.IsExecutable(p) {
			return p
		}
	}
	return ""
}

// RunAsRoot is the advice for a user who is not root. sudo's own PATH usually lacks Go, and a
// user's PATH often lacks /usr/sbin, where iptables is.
const RunAsRoot = "run the tests as root, e.g. `sudo env PATH=\"$PATH:/usr/sbin\" make test`"

// PackageNames returns the names of pkgs, space-separated, as apt-get takes them.
func PackageNames(pkgs []Package) string {
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.Name
	}
	return strings.Join(names, " ")
}

// Problem says what is missing, without the fix.
func (e *Missing) Problem() string {
	var parts []string
	if e.NotRoot {
		parts = append(parts, "not running as root")
	}
	if len(e.Packages) > 0 {
		parts = append(parts, fmt.Sprintf("Debian packages not installed: %s (not found: %s)",
			PackageNames(e.Packages), strings.Join(e.Commands, ", ")))
	}
	if len(e.OffPath) > 0 {
		parts = append(parts, fmt.Sprintf("not on PATH: %s", strings.Join(e.OffPath, ", ")))
	}
	return strings.Join(parts, "; ")
}

// Fix says what to run, in order.
func (e *Missing) Fix() string {
	var steps []string
	if len(e.Packages) > 0 {
		steps = append(steps, fmt.Sprintf("as root run `make prereqs` (or `apt-get install -y %s`)", PackageNames(e.Packages)))
	}
	if len(e.OffPath) > 0 {
		dirs := map[string]bool{}
		var add []string
		for _, p := range e.OffPath {
			if d := filepath.Dir(p); !dirs[d] {
				dirs[d] = true
				add = append(add, d)
			}
		}
		steps = append(steps, fmt.Sprintf("add %s to PATH", strings.Join(add, " and ")))
	}
	if e.NotRoot {
		steps = append(steps, RunAsRoot)
	}
	return strings.Join(steps, ", then ")
}

func (e *Missing) Error() string {
	return e.Problem() + ". Fix: " + e.Fix() + "."
}

// AsMissing returns err as a *Missing, or nil.
func AsMissing(err error) *Missing {
	var m *Missing
	if errors.As(err, &m) {
		return m
	}
	return nil
}
