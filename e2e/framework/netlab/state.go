package netlab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	// stateDir holds one slot-N.lock per slot and one lab-<id> owner file per live lab.
	stateDir = "/run/portico-netlab"
	// netnsDir is where `ip netns add` bind-mounts named namespaces.
	netnsDir = "/run/netns"
	// idPrefix starts every lab id; ids are idPrefix + 6 hex digits.
	idPrefix = "pt"
	// slotWait bounds how long New waits for a free slot.
	slotWait = 2 * time.Minute
)

// newID returns a random lab id such as "pt3fa29c". Every name the lab creates starts with the
// id and a dash, which keeps interface names within the kernel's 15 characters.
func newID() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating lab id: %w", err)
	}
	return idPrefix + hex.EncodeToString(b[:]), nil
}

func validID(id string) bool {
	if len(id) != len(idPrefix)+6 || !strings.HasPrefix(id, idPrefix) {
		return false
	}
	_, err := hex.DecodeString(id[len(idPrefix):])
	return err == nil
}

// acquireSlot takes the exclusive flock of the first free slot-N.lock, waiting up to slotWait.
// The lock lives as long as the returned file stays open (and dies with the process).
func acquireSlot(logf func(string, ...any)) (int, *os.File, error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("creating state dir: %w", err)
	}
	deadline := time.Now().Add(slotWait)
	logged := false
	for {
		for n := range slotCount {
			f, err := os.OpenFile(slotLockPath(n), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return 0, nil, fmt.Errorf("opening slot lock: %w", err)
			}
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				return n, f, nil
			}
			f.Close()
			if !errors.Is(err, unix.EWOULDBLOCK) {
				return 0, nil, fmt.Errorf("locking slot %d: %w", n, err)
			}
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("all %d lab slots stayed busy for %s", slotCount, slotWait)
		}
		if !logged {
			logf("netlab: all %d slots busy, waiting", slotCount)
			logged = true
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func slotLockPath(n int) string { return filepath.Join(stateDir, fmt.Sprintf("slot-%d.lock", n)) }

func ownerPath(id string) string { return filepath.Join(stateDir, "lab-"+id) }

// owner identifies the process that owns a lab: its pid and start time (so a recycled pid
// does not look alive).
type owner struct {
	pid   int
	start uint64
	slot  int
}

func (o owner) String() string {
	return fmt.Sprintf("pid=%d\nstart=%d\nslot=%d\n", o.pid, o.start, o.slot)
}

func parseOwner(b []byte) (owner, error) {
	var o owner
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return owner{}, fmt.Errorf("parsing owner line %q: %w", line, err)
		}
		switch k {
		case "pid":
			o.pid = int(n)
		case "start":
			o.start = n
		case "slot":
			o.slot = int(n)
		default:
			continue
		}
		seen++
	}
	if seen != 3 || o.pid <= 0 {
		return owner{}, fmt.Errorf("incomplete owner record %q", b)
	}
	return o, nil
}

// alive reports whether the owning process still runs.
func (o owner) alive() bool {
	start, err := processStart(o.pid)
	return err == nil && start == o.start
}

// processStart reads a process's start time (field 22 of /proc/PID/stat, in clock ticks).
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields[0] is field 3
	if len(fields) <= startField {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %d fields", pid, len(fields))
	}
	return strconv.ParseUint(fields[startField], 10, 64)
}

// createOwnerFile records this process as the owner of lab id and holds an flock on the record
// for the lab's life; Sweep skips records whose lock is held.
func createOwnerFile(id string, slot int) (*os.File, error) {
	start, err := processStart(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("reading own start time: %w", err)
	}
	f, err := os.OpenFile(ownerPath(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating owner record: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking owner record: %w", err)
	}
	rec := owner{pid: os.Getpid(), start: start, slot: slot}
	if _, err := f.WriteString(rec.String()); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing owner record: %w", err)
	}
	return f, nil
}

// Sweep removes what labs of dead processes left behind: processes in their namespaces, their
// root-namespace link, their namespaces and their owner record. Labs whose owner still runs are
// left alone. New calls Sweep first; a TestMain may call it too.
func Sweep() error {
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading state dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "lab-")
		if !ok || !validID(id) {
			continue
		}
		if err := sweepLab(id); err != nil {
			errs = append(errs, fmt.Errorf("sweeping lab %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func sweepLab(id string) error {
	f, err := os.OpenFile(ownerPath(id), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening owner record: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil // the owner (or another sweeper) holds it
		}
		return fmt.Errorf("locking owner record: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("checking owner record: %w", err)
	}
	if st.Nlink == 0 {
		return nil // removed by its owner's Close while we waited for the lock
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("reading owner record: %w", err)
	}
	o, err := parseOwner(b)
	if err != nil {
		// A record is written right after it is created; an unreadable one is only stale
		// once it is old.
		if time.Since(time.Unix(st.Mtim.Unix())) < time.Minute {
			return nil
		}
	} else if o.alive() {
		return nil
	}
	if err := teardown(id); err != nil {
		return err
	}
	if err := os.Remove(ownerPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing owner record: %w", err)
	}
	return nil
}

// teardown removes everything named after lab id: processes inside its namespaces, its links
// in the root namespace, and its namespaces. It is idempotent.
func teardown(id string) error {
	if !validID(id) {
		// Names are matched by prefix: never let a malformed id widen the match.
		return fmt.Errorf("refusing to tear down malformed lab id %q", id)
	}
	namespaces, err := labNamespaces(id)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range namespaces {
		if err := killNamespaceProcesses(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := deleteRootLinks(id); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range namespaces {
		if err := deleteNamespace(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// labNamespaces lists the named namespaces of lab id.
func labNamespaces(id string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), id+"-") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// createNamespace runs `ip netns add`, which also makes /run/netns a shared mount so that
// deleting the namespace later reaches the mount namespaces of running `ip netns exec`s.
func createNamespace(name string) error {
	out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// deleteNamespace does what `ip netns delete` does, tolerating a half-created namespace.
func deleteNamespace(name string) error {
	path := filepath.Join(netnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil &&
		!errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing namespace %s: %w", name, err)
	}
	return nil
}

// killNamespaceProcesses SIGKILLs every process whose network namespace is the named one
// (what `ip netns pids` lists), except this process.
func killNamespaceProcesses(name string) error {
	pids, err := namespacePIDs(name)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing pid %d in namespace %s: %w", pid, name, err)
		}
	}
	return nil
}

func namespacePIDs(name string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, name), &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue // gone, or a kernel thread
		}
		if st.Dev == want.Dev && st.Ino == want.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// deleteRootLinks deletes the root-namespace links named after lab id (the root link).
func deleteRootLinks(id string) error {
	links, err := rootLinks()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		if !strings.HasPrefix(l.Attrs().Name, id+"-") {
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting root link %s: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// rootLinks lists the links of this process's namespace, retrying a dump that raced a change.
func rootLinks() ([]netlink.Link, error) {
	for range 3 {
		links, err := netlink.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			if err != nil {
				return nil, fmt.Errorf("listing root links: %w", err)
			}
			return links, nil
		}
	}
	return nil, fmt.Errorf("listing root links: %w", netlink.ErrDumpInterrupted)
}
