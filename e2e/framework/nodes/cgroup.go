package nodes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMounts lists the mount points of every cgroup hierarchy (v1 controllers, name=systemd,
// and the unified cgroup2 one) of this mount namespace.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[sep+1]; (fs == "cgroup" || fs == "cgroup2") && !slices.Contains(dirs, fields[4]) {
			dirs = append(dirs, fields[4])
		}
	}
	return dirs, sc.Err()
}

// makeCgroup creates rel (e.g. "portico-nodes-1-2/node1") in every hierarchy, copying the
// cpuset of the parent into each new cpuset level (a v1 cpuset cgroup without cpus or mems
// takes no tasks).
func makeCgroup(rel string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := m
		for _, part := range strings.Split(rel, "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(parent, file))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
					return fmt.Errorf("setting %s of %s: %w", file, dir, err)
				}
			}
		}
	}
	return nil
}

// cgroupProcsFiles are the cgroup.procs files of rel in every hierarchy.
func cgroupProcsFiles(rel string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	files := make([]string, len(mounts))
	for i, m := range mounts {
		files[i] = filepath.Join(m, rel, "cgroup.procs")
	}
	return files, nil
}

// cgroupPIDs lists every process in rel or below it, in any hierarchy.
func cgroupPIDs(rel string) ([]int, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, m := range mounts {
		root := filepath.Join(m, rel)
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil // removed meanwhile
			}
			for _, line := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(line); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing processes of cgroup %s: %w", root, err)
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids, nil
}

// removeCgroup SIGKILLs every process in rel and below, waits until they are gone, and removes
// rel's directories, deepest first, in every hierarchy. It tolerates rel not existing.
func removeCgroup(rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids, err := cgroupPIDs(rel)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s outlived SIGKILL for %s", pids, rel, timeout)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("killing pid %d of cgroup %s: %w", pid, rel, err)
			}
		}
		time.Sleep(50 * time.Millisecond) // a killed process leaves cgroup.procs once reaped
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, rel)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children after their parents in walk order
			if err := rmdirRetry(dirs[i], deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirRetry removes an empty cgroup directory; the kernel refuses (EBUSY) for a moment after
// its last process exits.
func rmdirRetry(dir string, deadline time.Time) error {
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
