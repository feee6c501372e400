package tracker

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// Snapshot is the Store the sync loop hands its consumers: the Services and EndpointSlices as
// read once at the start of the sync (Refresh), not the informer caches as they are when a
// consumer reads them. Every consumer of one sync then sees the same objects: an update that
// arrives while the netfilter programmer runs reaches the announcers on the next sync, together
// with its rules, not on this one before them. (Reading the caches live, a node announced a new
// VIP by BGP in the same sync in which its rules were written without it, and the router's first
// packets for the VIP met no rule on that node: "network is unreachable" for up to a sync
// period.) Nodes and AddressPools are read live: the announcers alone read them.
type Snapshot struct {
	live    Store
	entries map[types.NamespacedName]snapshotEntry
	// keys are entries' keys, sorted (a full Refresh keeps the live store's sorted list); nil
	// when a partial Refresh added or removed an entry since.
	keys []types.NamespacedName
	// complete is set once every Service was read (the first Refresh reads them all).
	complete bool
}

type snapshotEntry struct {
	svc    *corev1.Service
	slices []*discoveryv1.EndpointSlice
}

var _ Store = (*Snapshot)(nil)

// NewSnapshot returns an empty Snapshot of live; its first Refresh reads every Service.
func NewSnapshot(live Store) *Snapshot {
	return &Snapshot{live: live, entries: map[types.NamespacedName]snapshotEntry{}}
}

// Refresh reads the changed Services and their EndpointSlices from the live store (every
// Service when full, forgetting the others). A Service that is gone leaves the snapshot. On an
// error the snapshot is incomplete and the next Refresh reads everything.
func (s *Snapshot) Refresh(full bool, changed map[types.NamespacedName]bool) error {
	if full || !s.complete {
		s.complete = false
		all, err := s.live.Services()
		if err != nil {
			return err
		}
		entries := make(map[types.NamespacedName]snapshotEntry, len(all))
		keys := all[:0] // the live list is sorted: keep it, less any Service gone since
		for _, key := range all {
			svc, eps, err := s.live.Service(key)
			if err != nil {
				return err
			}
			if svc != nil {
				entries[key] = snapshotEntry{svc: svc, slices: eps}
				keys = append(keys, key)
			}
		}
		s.entries, s.keys, s.complete = entries, keys, true
		return nil
	}
	for key := range changed {
		svc, eps, err := s.live.Service(key)
		if err != nil {
			s.complete = false
			return err
		}
		_, had := s.entries[key]
		if svc == nil {
			delete(s.entries, key)
		} else {
			s.entries[key] = snapshotEntry{svc: svc, slices: eps}
		}
		if had != (svc != nil) {
			s.keys = nil
		}
	}
	return nil
}

// Service implements Store: the Service as of the last Refresh.
func (s *Snapshot) Service(key types.NamespacedName) (*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	e, ok := s.entries[key]
	if !ok {
		return nil, nil, nil
	}
	return e.svc, e.slices, nil
}

// Services implements Store: the keys as of the last Refresh, sorted (a copy).
func (s *Snapshot) Services() ([]types.NamespacedName, error) {
	if s.keys == nil {
		s.keys = make([]types.NamespacedName, 0, len(s.entries))
		for k := range s.entries {
			s.keys = append(s.keys, k)
		}
		slices.SortFunc(s.keys, compareKeys)
	}
	return slices.Clone(s.keys), nil
}

// Node implements Store (live).
func (s *Snapshot) Node() *corev1.Node { return s.live.Node() }

// Nodes implements Store (live).
func (s *Snapshot) Nodes() ([]*corev1.Node, error) { return s.live.Nodes() }

// AddressPools implements Store (live).
func (s *Snapshot) AddressPools() ([]v1alpha1.AddressPool, error) { return s.live.AddressPools() }
