package nodeproxy

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// TestSettling: a starting agent counts the nodes of agents that have not joined yet as alive,
// until each has joined (or left) or the settle time has passed; then the view is membership's
// alone. Dead is never presumed away.
func TestSettling(t *testing.T) {
	start := time.Unix(1000, 0)
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	steps := []struct {
		name        string
		at          time.Duration
		alive, dead map[string]bool
		want        []string
		settled     bool
	}{
		{"alone at start: the others presumed", 0, set("n1"), set(), []string{"n1", "n2", "n3"}, false},
		{"n2 joined: n3 still presumed", time.Second, set("n1", "n2"), set(), []string{"n1", "n2", "n3"}, false},
		{"n2 left again: dead, not presumed", 2 * time.Second, set("n1"), set("n2"), []string{"n1", "n3"}, false},
		{"settle time over: n3 never joined", startupSettle, set("n1"), set("n2"), []string{"n1"}, true},
		{"settled for good", startupSettle + time.Second, set("n1"), set(), []string{"n1"}, true},
	}
	s := &settling{until: start.Add(startupSettle), log: logr.Discard(), peers: func() []string { return []string{"n2", "n3"} }}
	for _, st := range steps {
		got := s.view(start.Add(st.at), maps.Clone(st.alive), st.dead)
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, st.want) {
			t.Errorf("%s: view %v, want %v", st.name, names, st.want)
		}
		if s.done.Load() != st.settled {
			t.Errorf("%s: settled %v, want %v", st.name, s.done.Load(), st.settled)
		}
	}

	// Every other agent joined before the settle time: settled at once.
	s = &settling{until: start.Add(startupSettle), log: logr.Discard(), peers: func() []string { return []string{"n2", "n3"} }}
	if !s.settled(start, set("n1", "n2", "n3"), set()) {
		t.Error("all joined: not settled")
	}
	if got := s.view(start, set("n1"), set()); len(got) != 1 {
		t.Errorf("after settling, a node that left is presumed alive again: %v", got)
	}
}
