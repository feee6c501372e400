package bgp

import (
	"testing"

	"github.com/osrg/gobgp/v4/api"
)

func TestStaleReset(t *testing.T) {
	const (
		up   = api.BfdSessionState_BFD_SESSION_STATE_UP
		ini  = api.BfdSessionState_BFD_SESSION_STATE_INIT
		down = api.BfdSessionState_BFD_SESSION_STATE_DOWN
		est  = api.PeerState_SESSION_STATE_ESTABLISHED
		act  = api.PeerState_SESSION_STATE_ACTIVE
		idle = api.PeerState_SESSION_STATE_IDLE
		cfm  = api.PeerState_SESSION_STATE_OPENCONFIRM
	)
	for _, c := range []struct {
		name        string
		before, now bfdSeen
		want        bool
	}{
		{"BFD fell while the session was down", bfdSeen{up, act}, bfdSeen{down, act}, true},
		{"BFD fell from Init while idle", bfdSeen{ini, idle}, bfdSeen{down, idle}, true},
		{"BFD fell while the session was coming up", bfdSeen{up, cfm}, bfdSeen{down, cfm}, true},
		{"BFD fell and the established session took the reset", bfdSeen{up, est}, bfdSeen{down, idle}, false},
		{"BFD fell under an established session", bfdSeen{up, act}, bfdSeen{down, est}, false},
		{"BFD stayed down", bfdSeen{down, act}, bfdSeen{down, act}, false},
		{"BFD came up", bfdSeen{down, act}, bfdSeen{up, act}, false},
		{"BFD stayed up", bfdSeen{up, act}, bfdSeen{up, est}, false},
	} {
		if got := staleReset(c.before, c.now); got != c.want {
			t.Errorf("%s: staleReset(%v, %v) = %v, want %v", c.name, c.before, c.now, got, c.want)
		}
	}
}
