// Command prereqs checks, and as root on Debian installs, what the tests and the demo need
// beyond Go (make prereqs): the Debian packages of internal/prereq (apt-get update once, then
// apt-get install) and moto's server (pip, pinned, into a virtual environment in the cache).
// It prints one line when all is present. Otherwise it installs what it can and exits 1 naming
// what is still missing and the command that fixes it. Without root it installs no packages;
// PORTICO_SKIP_PRIVILEGED=1 turns missing root and missing network-lab packages into a notice.
//
//	go run ./e2e/tools/prereqs          # check and install
//	go run ./e2e/tools/prereqs -check   # check only, install nothing
//	go run ./e2e/tools/prereqs -list    # print every program Portico runs: package, how found
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

func main() {
	checkOnly := flag.Bool("check", false, "report what is missing; install nothing")
	list := flag.Bool("list", false, "print every external program Portico runs (internal/prereq.Programs) and exit")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: prereqs [-check | -list]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "prereqs: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if *list {
		printPrograms(os.Stdout)
		return
	}
	if err := run(prereq.Host(), !*checkOnly); err != nil {
		fmt.Fprintf(os.Stderr, "prereqs: %v\n", err)
		os.Exit(1)
	}
}

func run(m prereq.Machine, install bool) error {
	miss := check(m)
	if miss != nil && len(miss.Packages) > 0 && install && m.EUID == 0 {
		if err := aptInstall(miss.Packages); err != nil {
			return err
		}
		if miss = check(m); miss != nil && len(miss.Packages) > 0 {
			return fmt.Errorf("apt-get install succeeded, yet these commands are still found neither on PATH nor in /usr/sbin: %s",
				strings.Join(miss.Commands, ", "))
		}
	}
	if miss != nil && m.EUID != 0 {
		// Commands in /usr/sbin are installed; only root's tests need that on their PATH, and
		// they check it themselves.
		miss.OffPath = nil
	}
	if miss != nil {
		if err := report(m, miss); err != nil {
			return err
		}
	}
	if err := ensureArchitectures(m, install); err != nil {
		return err
	}
	if !m.MotoInstalled() {
		if err := ensureMoto(m, install); err != nil {
			return err
		}
	}
	fmt.Printf("prereqs: ok: %s; moto_server %s at %s\n", present(m), prereq.MotoVersion, m.MotoServerPath())
	return nil
}

// commandPackages are the packages found by their commands: all but python3-venv.
func commandPackages() []prereq.Package {
	var pkgs []prereq.Package
	for _, p := range prereq.Packages {
		if len(p.Commands) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// check returns what is missing, or nil. python3-venv counts only while moto is not installed
// and no python3 here can create its virtual environment.
func check(m prereq.Machine) *prereq.Missing {
	miss := prereq.AsMissing(m.Check(true, commandPackages()...))
	if m.Getenv(prereq.MotoServerEnv) == "" && !m.MotoInstalled() && m.MotoPython() == "" {
		if miss == nil {
			miss = &prereq.Missing{}
		}
		miss.Packages = append(miss.Packages, prereq.Python3Venv)
		miss.Commands = append(miss.Commands, "a python3 that can create a venv")
	}
	return miss
}

// report returns the error for what is missing, or nil after a notice when the user opted to
// skip the privileged tests and only their prerequisites are missing.
func report(m prereq.Machine, miss *prereq.Missing) error {
	if m.SkipPrivileged() && !needsUnprivileged(miss) {
		fmt.Printf("prereqs: %s=1, so the tests that need root and the network-lab packages will be skipped (%s)\n",
			prereq.SkipPrivilegedEnv, miss.Problem())
		return nil
	}
	fix := miss.Fix()
	if len(miss.Packages) > 0 && m.EUID != 0 {
		fix = fmt.Sprintf("`sudo apt-get install -y %s` (or `make prereqs` as root)", prereq.PackageNames(miss.Packages))
		if miss.NotRoot {
			fix += ", then " + prereq.RunAsRoot
		}
	}
	if !m.MotoInstalled() && m.Getenv(prereq.MotoServerEnv) == "" {
		fix += fmt.Sprintf("; `make prereqs` then installs moto's server (%s) into %s", prereq.MotoRequirement, m.MotoVenv())
	}
	msg := fmt.Sprintf("%s.\nFix: %s.", miss.Problem(), fix)
	if !needsUnprivileged(miss) {
		msg += fmt.Sprintf("\nOr set %s=1 to skip the tests that need root and the network-lab packages.", prereq.SkipPrivilegedEnv)
	}
	return errors.New(msg)
}

// needsUnprivileged reports whether something besides root and the packages of the privileged
// tests is missing: PORTICO_SKIP_PRIVILEGED does not cover it.
func needsUnprivileged(miss *prereq.Missing) bool {
	for _, p := range miss.Packages {
		if !p.Privileged {
			return true
		}
	}
	return false
}

// aptInstall runs apt-get update once, then installs pkgs without prompting.
func aptInstall(pkgs []prereq.Package) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("packages %s are missing and there is no apt-get: install them with this system's package manager", prereq.PackageNames(pkgs))
	}
	names := strings.Fields(prereq.PackageNames(pkgs))
	fmt.Printf("prereqs: installing Debian packages: %s\n", strings.Join(names, " "))
	for _, args := range [][]string{
		{"update", "-qq"},
		append([]string{"install", "-y", "-qq", "--no-install-recommends"}, names...),
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// ensureArchitectures makes apt know the Debian architectures of prereq.ImagePlatforms (for
// the agent image's packages): as root, dpkg --add-architecture for each missing one, then
// apt-get update. Only apt's lists change. Without root, or with -check, a missing one is an
// error naming the fix (a notice with PORTICO_SKIP_PRIVILEGED).
func ensureArchitectures(m prereq.Machine, install bool) error {
	if _, err := exec.LookPath("dpkg"); err != nil {
		return nil // not Debian: the images' packages cannot be fetched here at all (internal/images says so)
	}
	native, err := exec.Command("dpkg", "--print-architecture").Output()
	if err != nil {
		return fmt.Errorf("dpkg --print-architecture: %w", err)
	}
	foreign, err := exec.Command("dpkg", "--print-foreign-architectures").Output()
	if err != nil {
		return fmt.Errorf("dpkg --print-foreign-architectures: %w", err)
	}
	var want []string
	for _, p := range prereq.ImagePlatforms {
		want = append(want, images.DebianArch(p))
	}
	missing := prereq.MissingArchitectures(want, strings.TrimSpace(string(native)), strings.Fields(string(foreign)))
	if len(missing) == 0 {
		return nil
	}
	if !install || m.EUID != 0 {
		msg := fmt.Sprintf("apt knows no packages for %s, which `make push` builds the agent image for. Fix: as root run `make prereqs` (dpkg --add-architecture %s; apt-get update)",
			strings.Join(missing, ", "), strings.Join(missing, " "))
		if m.SkipPrivileged() {
			fmt.Printf("prereqs: notice: %s\n", msg)
			return nil
		}
		return errors.New(msg)
	}
	fmt.Printf("prereqs: adding the architectures %s to apt's lists (no packages of them are installed)\n", strings.Join(missing, ", "))
	for _, a := range missing {
		if out, err := exec.Command("dpkg", "--add-architecture", a).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg --add-architecture %s: %w: %s", a, err, out)
		}
	}
	cmd := exec.Command("apt-get", "update", "-qq")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	return nil
}

// ensureMoto installs moto's server into the cache's virtual environment unless
// PORTICO_MOTO_SERVER points elsewhere.
func ensureMoto(m prereq.Machine, install bool) error {
	if m.Getenv(prereq.MotoServerEnv) != "" || !install {
		_, err := m.MotoServer()
		return err
	}
	py := m.MotoPython()
	if py == "" {
		return fmt.Errorf("no python3 here can create a virtual environment for moto's server. Fix: `sudo apt-get install -y python3-venv` (or `make prereqs` as root)")
	}
	venv := m.MotoVenv()
	if err := os.MkdirAll(filepath.Dir(venv), 0o755); err != nil {
		return err
	}
	unlock, err := lock(venv + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if m.MotoInstalled() { // another make prereqs did it while we waited
		return nil
	}
	fmt.Printf("prereqs: installing %s into %s (python %s)\n", prereq.MotoRequirement, venv, py)
	err = installMoto(py, venv)
	if err == nil && !m.MotoInstalled() {
		err = fmt.Errorf("pip succeeded but %s is missing", m.MotoServerPath())
	}
	if err != nil {
		_ = os.RemoveAll(venv)
		return fmt.Errorf("installing moto's server: %w\nFix the cause above and run `make prereqs` again, or install it by hand: %s",
			err, m.MotoInstallCommand(py))
	}
	return nil
}

// installMoto creates a fresh virtual environment at venv from py and pip-installs the pinned
// moto into it.
func installMoto(py, venv string) error {
	if err := os.RemoveAll(venv); err != nil {
		return err
	}
	for _, argv := range [][]string{
		{py, "-m", "venv", venv},
		{filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check", prereq.MotoRequirement},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	return nil
}

// lock takes an exclusive flock on path, so that concurrent runs install once.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// present names root and the packages that are installed, for the summary line.
func present(m prereq.Machine) string {
	var names []string
	for _, p := range commandPackages() {
		if miss := prereq.AsMissing(m.Check(false, p)); miss == nil || len(miss.Packages) == 0 {
			names = append(names, p.Name)
		}
	}
	if m.EUID == 0 {
		names = append([]string{"root"}, names...)
	}
	return strings.Join(names, ", ")
}

// printPrograms writes the program list as a table: name, where it comes from, how it is
// found, who runs it.
func printPrograms(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROGRAM\tFROM\tFOUND\tRUN BY")
	for _, p := range prereq.Programs {
		from := string(p.Source)
		if p.Source == prereq.Debian {
			from = "debian:" + p.Package
			if p.Base {
				from += " (not installed by prereqs)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, from, p.Found, p.RunBy)
	}
	tw.Flush()
}
