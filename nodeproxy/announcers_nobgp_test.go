//go:build portico_nobgp

package nodeproxy

import (
	"strings"
	"testing"

	"github.com/portico-lb/portico/config"
)

// An agent built without the BGP announcer refuses --announce=bgp at startup, naming the build
// tag, and still knows the L2 announcer.
func TestBuiltWithoutBGP(t *testing.T) {
	err := checkAnnouncers([]string{config.AnnouncerL2, config.AnnouncerBGP})
	if err == nil || !strings.Contains(err.Error(), "--announce=bgp") || !strings.Contains(err.Error(), "portico_nobgp") {
		t.Fatalf("checkAnnouncers(l2, bgp) = %v, want the bgp announcer refused", err)
	}
	if err := checkAnnouncers([]string{config.AnnouncerL2}); err != nil {
		t.Fatalf("checkAnnouncers(l2) = %v", err)
	}
}
