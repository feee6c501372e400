package netlab

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNamespace runs fn on an OS thread switched into the named network namespace. Sockets fn
// creates belong to that namespace for their whole life; so do /proc/sys/net files it opens.
//
// fn runs on a fresh goroutine locked to its thread. The thread returns to the original
// namespace afterwards; if that fails, the goroutine exits still locked, which makes the Go
// runtime terminate the thread instead of reusing it in the wrong namespace.
func inNamespace(ns string, fn func() error) error {
	target, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", ns, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leaving namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// withHandle runs fn with a route netlink handle inside the named namespace. The handle is
// closed afterwards: an open netlink socket would keep a deleted namespace alive.
func withHandle(ns string, fn func(h *netlink.Handle) error) error {
	target, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", ns, err)
	}
	defer target.Close()
	h, err := netlink.NewHandleAt(target, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("opening netlink in %s: %w", ns, err)
	}
	defer h.Close()
	return fn(h)
}

// sysctl is one /proc/sys setting, key in dotted form ("net.ipv4.ip_forward").
type sysctl struct{ key, value string }

// writeSysctls writes settings in the calling thread's namespace; call it inside inNamespace
// (or from an unlocked goroutine for the root namespace). Keys must not contain interface
// names with dots.
func writeSysctls(settings ...sysctl) error {
	for _, s := range settings {
		path := "/proc/sys/" + strings.ReplaceAll(s.key, ".", "/")
		if err := os.WriteFile(path, []byte(s.value), 0o644); err != nil {
			return fmt.Errorf("setting %s=%s: %w", s.key, s.value, err)
		}
	}
	return nil
}
