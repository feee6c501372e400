package cluster

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Manager is a controller-runtime manager (portico-controller's, say) running in the test
// process against a cluster.
type Manager struct {
	tb   testing.TB
	stop context.CancelFunc
	done chan error
}

// StartManager runs mgr until Stop or the end of the test.
func StartManager(tb testing.TB, mgr manager.Manager) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{tb: tb, stop: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	tb.Cleanup(m.Stop)
	return m
}

// Stop ends the manager and fails the test if it exits with an error or not within 30 s. Only
// the first call does anything.
func (m *Manager) Stop() {
	if m == nil || m.stop == nil {
		return
	}
	m.stop()
	m.stop = nil
	select {
	case err := <-m.done:
		if err != nil {
			m.tb.Errorf("controller exited with error: %v", err)
		}
	case <-time.After(30 * time.Second):
		m.tb.Errorf("controller did not stop within 30s")
	}
}
