//go:build !portico_nobgp

package nodeproxy

import (
	"maps"
	"slices"
	"testing"

	"github.com/portico-lb/portico/config"
)

// A default build has the constructor of every announcer --announce accepts.
func TestAnnouncersRegistered(t *testing.T) {
	names := slices.Sorted(maps.Keys(config.KnownAnnouncers))
	if err := checkAnnouncers(names); err != nil {
		t.Fatalf("checkAnnouncers(%v) = %v", names, err)
	}
	if err := checkAnnouncers([]string{"bpg"}); err == nil {
		t.Fatal("checkAnnouncers(bpg) = nil, want an error")
	}
}
