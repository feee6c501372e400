package reference

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/portico-lb/portico/providers"
)

// This file holds the test hooks: exported methods that are not part of providers.Provider and
// exist only so tests can observe the provider and inject faults.

// enter runs at the start of every Provider method: it counts the call, sleeps the configured
// delay (returning early with ctx's error) and returns an error queued by FailNext.
func (p *Provider) enter(ctx context.Context, op string) error {
	p.mu.Lock()
	p.calls[op]++
	delay := p.delay
	p.mu.Unlock()

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		case <-timer.C:
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.failNext[op]; len(q) > 0 {
		p.failNext[op] = q[1:]
		return q[0]
	}
	return nil
}

// Calls is a test hook. It returns how many times each operation (OpEnsure, OpGet, OpDelete) has
// been called, including calls that failed. The map is a copy.
func (p *Provider) Calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// Desired is a test hook. It returns a deep copy of the model last passed to a successful Ensure
// for ref, and false if ref has no load balancer.
func (p *Provider) Desired(ref providers.Ref) (*providers.LoadBalancer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.lbs[ref]
	if !ok {
		return nil, false
	}
	return clone(e.desired), true
}

// Refs is a test hook. It returns the Refs that have a load balancer, sorted by namespace, name
// and UID; a test uses it to check that nothing leaked.
func (p *Provider) Refs() []providers.Ref {
	p.mu.Lock()
	defer p.mu.Unlock()
	refs := slices.Collect(maps.Keys(p.lbs))
	slices.SortFunc(refs, func(a, b providers.Ref) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.UID, b.Namespace+"/"+b.Name+"/"+b.UID)
	})
	return refs
}

// FailNext is a test hook. It makes the next call of op (OpEnsure, OpGet or OpDelete) return err
// unchanged, without touching any state, for example to exercise retries after a transient
// error or a *providers.RetryError. Calls queue: FailNext twice fails the next two calls.
// It panics on an unknown op or a nil err.
func (p *Provider) FailNext(op string, err error) {
	switch op {
	case OpEnsure, OpGet, OpDelete:
	default:
		panic(fmt.Sprintf("reference: FailNext: unknown operation %q", op))
	}
	if err == nil {
		panic("reference: FailNext: nil error")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext[op] = append(p.failNext[op], err)
}

// SetDelay is a test hook. Every later call sleeps d before doing anything, returning early
// with the context's error if ctx ends first; it simulates a slow cloud API. Zero disables it.
func (p *Provider) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Drift is a test hook. It simulates an out-of-band change to ref's load balancer (someone
// edited it behind the controller's back): the next successful Ensure for ref converges it
// again and counts one repair (see Repairs). It reports whether ref has a load balancer.
func (p *Provider) Drift(ref providers.Ref) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.lbs[ref]
	if ok {
		e.drifted = true
	}
	return ok
}

// Repairs is a test hook. It returns how many drifted load balancers Ensure has converged.
func (p *Provider) Repairs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.repairs
}

// WarnWith is a test hook. Every later successful Ensure reports these warnings in its Status
// (none after WarnWith()), as a provider does for a setting it ignores.
func (p *Provider) WarnWith(warnings ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warnings = slices.Clone(warnings)
}
