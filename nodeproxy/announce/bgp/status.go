package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/osrg/gobgp/v4/api"
)

// SessionState is a BGP session's state (RFC 4271 section 8).
type SessionState string

// Session states. Only Established carries routes.
const (
	SessionUnknown     SessionState = "Unknown"
	SessionIdle        SessionState = "Idle"
	SessionConnect     SessionState = "Connect"
	SessionActive      SessionState = "Active"
	SessionOpenSent    SessionState = "OpenSent"
	SessionOpenConfirm SessionState = "OpenConfirm"
	SessionEstablished SessionState = "Established"
)

var sessionStates = []SessionState{SessionIdle, SessionConnect, SessionActive, SessionOpenSent, SessionOpenConfirm, SessionEstablished, SessionUnknown}

// BFDState is a BFD session's state (RFC 5880), or BFDDisabled for a peer without BFD.
type BFDState string

// BFD states.
const (
	BFDDisabled  BFDState = "Disabled"
	BFDUnknown   BFDState = "Unknown"
	BFDAdminDown BFDState = "AdminDown"
	BFDDown      BFDState = "Down"
	BFDInit      BFDState = "Init"
	BFDUp        BFDState = "Up"
)

var bfdStates = []BFDState{BFDDisabled, BFDAdminDown, BFDDown, BFDInit, BFDUp, BFDUnknown}

// Status is what the speaker reports: one entry per configured peer, ordered by address.
type Status struct {
	Peers []PeerStatus
	// Advertisements is the number of prefixes the speaker announces (to each established peer
	// of the prefix's family).
	Advertisements int
}

// PeerStatus is the state of one peer's session.
type PeerStatus struct {
	Address netip.Addr
	State   SessionState
	BFD     BFDState
	// Advertised is the number of prefixes currently advertised to the peer (0 unless
	// Established).
	Advertised int
	// Message explains a session that is not established, for status conditions; empty when
	// Established.
	Message string
}

// Status reports every peer's session and BFD state and advertised prefix count.
func (s *Speaker) Status(ctx context.Context) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return Status{}, ErrStopped
	}
	st := Status{Advertisements: len(s.advs)}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		ps := PeerStatus{
			Address:    addr,
			State:      sessionState(p.GetState().GetSessionState()),
			BFD:        BFDDisabled,
			Advertised: int(advertised(p)),
		}
		if peer, ok := s.peers[addr]; ok && peer.BFD != nil {
			ps.BFD = bfdState(p.GetState().GetBfdState().GetSessionState())
		}
		if ps.State != SessionEstablished {
			ps.Message = notEstablishedMessage(s.peers[addr], p.GetState())
		}
		st.Peers = append(st.Peers, ps)
	})
	if err != nil {
		return Status{}, fmt.Errorf("listing peers: %w", err)
	}
	slices.SortFunc(st.Peers, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return st, nil
}

// notEstablishedMessage says, as far as the session's counters tell, why a session is down.
func notEstablishedMessage(p Peer, st *api.PeerState) string {
	reason := ""
	if r := st.GetDisconnectReason(); r != api.PeerState_DISCONNECT_REASON_UNSPECIFIED {
		reason = strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(r.String(), "DISCONNECT_REASON_"), "_", " "))
		if m := st.GetDisconnectMessage(); m != "" {
			reason += ": " + m
		}
		reason = "; last disconnect: " + reason
	}
	if st.GetMessages().GetReceived().GetOpen() > 0 {
		return "the peer answered but the session did not come up (check ASNs and address families)" + reason
	}
	msg := fmt.Sprintf("no BGP OPEN received: TCP to %s port %d does not connect (peer down, unreachable, or not configured for this node)", p.Address, p.port())
	if p.Password != "" {
		msg += "; with an MD5 password set, a password mismatch looks exactly like this (the kernel drops wrongly signed segments)"
	}
	return msg + reason
}
