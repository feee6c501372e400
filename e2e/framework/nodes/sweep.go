package nodes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sweep removes what clusters of dead test processes left behind: every process in their
// cgroup subtrees (containers, containerd shims; kubelet, containerd and the holders die with
// their owner through Pdeathsig), shims still serving their containerd sockets, the cgroups and
// the state directories. The lab namespaces and root link are netlab.Sweep's. Clusters of live
// processes are left alone. Start calls Sweep first; `make clean-lab` runs it too.
func Sweep() error {
	names := map[string]bool{}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		entries, _ := os.ReadDir(m)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), dirPrefix) {
				names[e.Name()] = true
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		names[filepath.Base(d)] = true
	}
	var errs []error
	for name := range names {
		if ownerAlive(name) {
			continue
		}
		if err := killShims(filepath.Join(os.TempDir(), name)); err != nil {
			errs = append(errs, err)
		}
		if err := removeCgroup(name, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(filepath.Join(os.TempDir(), name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ownerAlive reports whether the process whose pid follows dirPrefix in name still runs.
func ownerAlive(name string) bool {
	pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, dirPrefix), "-")
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return true // not ours to judge
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// killShims SIGKILLs containerd shims whose -address lies under dir (a node's containerd
// socket), in case one left its node's cgroup.
func killShims(dir string) error {
	procs, err := processesMentioning(dir + "/")
	if err != nil {
		return err
	}
	for _, p := range procs {
		if !strings.Contains(p.cmdline, "containerd-shim") {
			continue
		}
		if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing shim %d: %w", p.pid, err)
		}
	}
	return nil
}

type procInfo struct {
	pid     int
	cmdline string
}

// processesMentioning lists processes (other than this one) whose command line contains s.
func processesMentioning(s string) ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cmd, s) {
			out = append(out, procInfo{pid: pid, cmdline: cmd})
		}
	}
	return out, nil
}

// Leftovers lists what remains of a closed cluster whose state directory was dir and whose
// lab id was labID: processes naming dir or living in its cgroups, mounts under dir in any
// process's mount namespace, cgroup directories, lab namespaces and root links. A test asserts
// it is empty after Close.
func Leftovers(dir, labID string) ([]string, error) {
	var found []string
	name := filepath.Base(dir)
	procs, err := processesMentioning(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		found = append(found, fmt.Sprintf("process %d: %s", p.pid, p.cmdline))
	}
	pids, err := cgroupPIDs(name)
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		found = append(found, fmt.Sprintf("process %d in cgroup %s", pid, name))
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, name)); err == nil {
			found = append(found, "cgroup "+filepath.Join(m, name))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		found = append(found, "directory "+dir)
	}
	mnts, err := mountsUnder(dir)
	if err != nil {
		return nil, err
	}
	found = append(found, mnts...)
	if labID != "" {
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), labID+"-") {
				found = append(found, "network namespace "+e.Name())
			}
		}
		entries, _ = os.ReadDir("/sys/class/net")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), labID+"-") {
				found = append(found, "root link "+e.Name())
			}
		}
	}
	return found, nil
}

// mountsUnder lists the mounts of every mount namespace (read through each process's
// mountinfo) whose mount point or source lies under dir.
func mountsUnder(dir string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	seenNS := map[string]bool{}
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt"))
		if err != nil || seenNS[ns] {
			continue
		}
		seenNS[ns] = true
		f, err := os.Open(filepath.Join("/proc", e.Name(), "mountinfo"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, dir) {
				found = append(found, fmt.Sprintf("mount in %s (pid %s): %s", ns, e.Name(), line))
			}
		}
		f.Close()
	}
	return found, nil
}
