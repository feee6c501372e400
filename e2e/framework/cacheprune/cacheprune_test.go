package cacheprune

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	parent := t.TempDir()
	now := time.Now()
	mk := func(name string, age time.Duration) {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	mk("agent-1", 1*time.Minute)
	mk("agent-2", 2*time.Hour)
	mk("agent-3", 10*time.Hour) // beyond keep=2 and old: removed
	mk("agent-4", 20*time.Hour) // removed
	mk("agent-5", 30*time.Minute)
	mk("controller-1", 50*time.Hour) // another prefix: kept
	mk(".building-1", 50*time.Hour)  // being written: kept

	got := prune(parent, "agent-", 2, 6*time.Hour, now)
	sort.Strings(got)
	if want := []string{"agent-3", "agent-4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	// agent-2 is beyond the newest 2 but used within the age: kept.
	for _, name := range []string{"agent-1", "agent-2", "agent-5", "controller-1", ".building-1"} {
		if _, err := os.Stat(filepath.Join(parent, name, "bin")); err != nil {
			t.Errorf("%s removed: %v", name, err)
		}
	}
	for _, name := range []string{"agent-3", "agent-4"} {
		if _, err := os.Stat(filepath.Join(parent, name)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", name, err)
		}
	}

	// Touch makes an old entry the newest: a later prune keeps it.
	mk("agent-6", 40*time.Hour)
	Touch(filepath.Join(parent, "agent-6"))
	if got := prune(parent, "agent-", 1, 6*time.Hour, time.Now()); len(got) != 0 {
		t.Fatalf("removed %v, want none (all used within the age)", got)
	}
}
