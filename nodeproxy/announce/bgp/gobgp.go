package bgp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// This file turns the package's declarative types into GoBGP API values. It is pure: nothing
// here talks to a server.

// grDeferral bounds how long a restarted speaker holds its routes back while it waits for the
// End-of-RIB of every graceful-restart peer (RFC 4724 4.1, the Selection_Deferral_Timer):
// GoBGP's default, 360 s, would hide every route for 6 minutes when one peer is down.
const grDeferral = 10 * time.Second

// apiPeer is the GoBGP neighbour configuration of p: one address family, the peer's own.
// restarting marks a peer added right after this process started: with graceful restart, its
// OPEN says so (Restart State and Forwarding State bits), so that a helping router keeps this
// node's stale routes until they are sent again instead of dropping them on the new OPEN.
func apiPeer(p Peer, restarting bool) *api.Peer {
	family := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Address.Is6() {
		family.Afi = api.Family_AFI_IP6
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			LocalAsn:        p.MyASN,
			AuthPassword:    p.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          seconds(p.holdTime()),
			KeepaliveInterval: seconds(p.keepaliveTime()),
			ConnectRetry:      seconds(p.connectRetry()),
			// After a reset (BFD down, hold timer expiry) wait no longer than between connection
			// attempts; GoBGP's default is 30 s.
			IdleHoldTimeAfterReset: seconds(p.connectRetry()),
		}},
		Transport: &api.Transport{RemotePort: uint32(p.port())},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: family, Enabled: true}}},
	}
	if p.SourceAddress.IsValid() {
		ap.Transport.LocalAddress = p.SourceAddress.String()
	}
	if p.EBGPMultihopTTL > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihopTTL)}
	}
	if p.GracefulRestart > 0 {
		ap.GracefulRestart = &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     uint32(seconds(p.GracefulRestart)),
			DeferralTime:    uint32(seconds(grDeferral)),
			LocalRestarting: restarting,
		}
		ap.AfiSafis[0].MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
	}
	if b := p.BFD; b != nil {
		ap.Bfd = &api.BfdPeerConfig{
			Enabled:                  true,
			RequiredMinimumReceive:   uint32(b.ReceiveInterval / time.Microsecond),
			DesiredMinimumTxInterval: uint32(b.TransmitInterval / time.Microsecond),
			DetectionMultiplier:      uint32(b.Multiplier),
		}
	}
	return ap
}

func seconds(d time.Duration) uint64 { return uint64(d / time.Second) }

// apiPath is the GoBGP path announcing a. Its next hop is the unspecified address of the
// family, which GoBGP replaces, per session, with the session's local address: each peer gets
// this node's address on its own segment.
func apiPath(a Advertisement) (*apiutil.Path, error) {
	nlri, err := gobgp.NewIPAddrPrefix(a.Prefix)
	if err != nil {
		return nil, fmt.Errorf("building NLRI for %s: %w", a.Prefix, err)
	}
	attrs := []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	family := gobgp.RF_IPv4_UC
	if a.Prefix.Addr().Is4() {
		nh, err := gobgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, fmt.Errorf("building next hop for %s: %w", a.Prefix, err)
		}
		attrs = append(attrs, nh)
	} else {
		family = gobgp.RF_IPv6_UC
		mp, err := gobgp.NewPathAttributeMpReachNLRI(family, []gobgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, fmt.Errorf("building MP_REACH_NLRI for %s: %w", a.Prefix, err)
		}
		attrs = append(attrs, mp)
	}
	if len(a.Communities) > 0 {
		attrs = append(attrs, gobgp.NewPathAttributeCommunities(a.Communities))
	}
	if len(a.LargeCommunities) > 0 {
		lcs := make([]*gobgp.LargeCommunity, len(a.LargeCommunities))
		for i, c := range a.LargeCommunities {
			lcs[i] = gobgp.NewLargeCommunity(c.ASN, c.Data1, c.Data2)
		}
		attrs = append(attrs, gobgp.NewPathAttributeLargeCommunities(lcs))
	}
	if a.LocalPref != 0 {
		attrs = append(attrs, gobgp.NewPathAttributeLocalPref(a.LocalPref))
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs}, nil
}

// sessionState names a GoBGP session state the way RFC 4271 does.
func sessionState(s api.PeerState_SessionState) SessionState {
	switch s {
	case api.PeerState_SESSION_STATE_IDLE:
		return SessionIdle
	case api.PeerState_SESSION_STATE_CONNECT:
		return SessionConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return SessionActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return SessionOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return SessionOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return SessionEstablished
	}
	return SessionUnknown
}

// bfdState names a GoBGP BFD session state.
func bfdState(s api.BfdSessionState) BFDState {
	switch s {
	case api.BfdSessionState_BFD_SESSION_STATE_UP:
		return BFDUp
	case api.BfdSessionState_BFD_SESSION_STATE_DOWN:
		return BFDDown
	case api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:
		return BFDAdminDown
	case api.BfdSessionState_BFD_SESSION_STATE_INIT:
		return BFDInit
	}
	return BFDUnknown
}
