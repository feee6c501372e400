package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/osrg/gobgp/v4/api"
)

// GoBGP v4.8.0 resets a peer whenever its BFD session leaves Init or Up (detection time expired,
// or the remote signalled Down) by queueing a Cease NOTIFICATION (Administrative Reset, "BFD is
// down") on the peer's FSM. The FSM reads that queue only while Established, so a reset queued
// while the session is down stays there and kills the next session the moment it reaches
// Established (osrg/gobgp#3561). Routers that drop their BFD session along with the BGP session
// (bird2 does) then let our BFD expire again while BGP is down, which queues the next stale
// reset: the peer never stays up.
//
// The guard breaks that loop: every bfdGuardEvery it reads each BFD peer's BGP and BFD state,
// and when BFD has fallen from Init or Up to Down while the session was not Established, it
// deletes and re-adds the peer. The new peer has a fresh FSM (no queued NOTIFICATION) and a
// fresh BFD session; the global export policy, which is keyed by address, is untouched.

// bfdGuardEvery is how often the guard reads the peers' states: well under GoBGP's shortest
// reconnect (the connect retry, at least 1 s), so a stale reset is cleared before the next
// session comes up.
const bfdGuardEvery = 100 * time.Millisecond

// bfdSeen is one BFD peer's states at the guard's last look.
type bfdSeen struct {
	bfd     api.BfdSessionState
	session api.PeerState_SessionState
}

// staleReset reports whether GoBGP has queued a reset that no session consumed: BFD fell from
// Init or Up to Down while the BGP session was not Established, at the last look and now (a
// session that was Established when BFD fell took the reset itself).
func staleReset(before, now bfdSeen) bool {
	wasLive := before.bfd == api.BfdSessionState_BFD_SESSION_STATE_UP || before.bfd == api.BfdSessionState_BFD_SESSION_STATE_INIT
	established := before.session == api.PeerState_SESSION_STATE_ESTABLISHED || now.session == api.PeerState_SESSION_STATE_ESTABLISHED
	return wasLive && now.bfd == api.BfdSessionState_BFD_SESSION_STATE_DOWN && !established
}

// guardBFD runs the guard until ctx ends.
func (s *Speaker) guardBFD(ctx context.Context) {
	tick := time.NewTicker(bfdGuardEvery)
	defer tick.Stop()
	seen := map[netip.Addr]bfdSeen{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.checkBFD(ctx, seen); err != nil {
			s.log.Error(err, "BFD guard")
		}
	}
}

// checkBFD is one look of the guard; seen carries each peer's states between looks.
func (s *Speaker) checkBFD(ctx context.Context, seen map[netip.Addr]bfdSeen) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	now := map[netip.Addr]bfdSeen{}
	for addr, p := range s.peers {
		if p.BFD != nil {
			now[addr] = bfdSeen{}
		}
	}
	if len(now) == 0 {
		clear(seen)
		return nil
	}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		if _, ok := now[addr]; ok {
			now[addr] = bfdSeen{bfd: p.GetState().GetBfdState().GetSessionState(), session: p.GetState().GetSessionState()}
		}
	})
	if err != nil {
		return fmt.Errorf("listing peers: %w", err)
	}
	var errs []error
	for addr, st := range now {
		before, ok := seen[addr]
		seen[addr] = st
		if !ok || !staleReset(before, st) {
			continue
		}
		if err := s.recreatePeer(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(seen, addr)
	}
	for addr := range seen {
		if _, ok := now[addr]; !ok {
			delete(seen, addr)
		}
	}
	return errors.Join(errs...)
}

// recreatePeer deletes the peer at addr from GoBGP and adds it again with the same
// configuration. s.mu must be held. A failed add drops the peer from s.peers, so the next
// SetPeers adds it.
func (s *Speaker) recreatePeer(ctx context.Context, addr netip.Addr) error {
	p := s.peers[addr]
	if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("removing peer %s: %w", addr, err)
	}
	if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, s.addedRestarting[addr])}); err != nil {
		delete(s.peers, addr)
		return fmt.Errorf("adding peer %s again: %w", addr, err)
	}
	s.recreations.Inc()
	s.log.Info("BGP peer recreated: its BFD session went down while the session was not established, which leaves GoBGP a reset for the next session", "peer", addr)
	return nil
}
