package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Peer is one BGP neighbour of this node, as SetPeers takes it. Peers are identified by
// Address: a SetPeers call that changes any other field of a peer restarts its session.
type Peer struct {
	// Address is the neighbour's address. Its family decides the session's address family: an
	// IPv4 peer carries IPv4 unicast only, an IPv6 peer IPv6 unicast only (see doc.go).
	Address netip.Addr
	// ASN is the neighbour's AS number; MyASN is ours on this session. Equal numbers make the
	// session iBGP.
	ASN, MyASN uint32
	// Port is the neighbour's TCP port; 0 means 179.
	Port uint16
	// SourceAddress, when valid, is the local address the session binds to (and so the next
	// hop the peer sees). Zero: the kernel picks the address on the route to the peer.
	SourceAddress netip.Addr
	// HoldTime is the hold time we offer; 0 means 90 s. Otherwise at least 3 s (RFC 4271).
	HoldTime time.Duration
	// KeepaliveTime is the keepalive interval; 0 means a third of the hold time.
	KeepaliveTime time.Duration
	// ConnectRetry is how long to wait between connection attempts; 0 means 5 s.
	ConnectRetry time.Duration
	// Password turns on TCP MD5 signatures (RFC 2385) with this key.
	Password string
	// BFD, when not nil, runs single-hop BFD (GoBGP's native implementation) with the peer; the
	// session is reset as soon as BFD declares the peer down.
	BFD *BFD
	// EBGPMultihopTTL, when not zero, allows an eBGP peer that many hops away.
	EBGPMultihopTTL uint8
	// GracefulRestart, when not zero, offers BGP graceful restart (RFC 4724) with this restart
	// time (whole seconds, at most 4095): a peer that helps keeps this node's routes (marked
	// stale) for that long after the session ends without a NOTIFICATION, which is how
	// StopForRestart ends it, and drops them once the next session has sent End-of-RIB.
	GracefulRestart time.Duration
}

// BFD holds a peer's BFD timers. Zero fields take GoBGP's defaults (1 s, 1 s, 3).
type BFD struct {
	// ReceiveInterval is the shortest interval between received BFD packets we ask for;
	// TransmitInterval the interval we send at. Both have microsecond resolution.
	ReceiveInterval, TransmitInterval time.Duration
	// Multiplier is how many missed intervals declare the peer down.
	Multiplier uint8
}

// Defaults the Peer fields' zero values stand for.
const (
	DefaultPort         = 179
	DefaultHoldTime     = 90 * time.Second
	DefaultConnectRetry = 5 * time.Second
	minHoldTime         = 3 * time.Second
	// MaxGracefulRestart is the longest restart time the capability's 12-bit field holds.
	MaxGracefulRestart = 4095 * time.Second
)

// LargeCommunity is a BGP large community (RFC 8092), written ASN:Data1:Data2.
type LargeCommunity struct{ ASN, Data1, Data2 uint32 }

func (c LargeCommunity) String() string { return fmt.Sprintf("%d:%d:%d", c.ASN, c.Data1, c.Data2) }

// Advertisement is one prefix this node announces to the peers of the prefix's family: every
// one of them, or only those listed in Peers.
type Advertisement struct {
	// Prefix is the announced prefix, normally a VIP's /32 or /128 (an aggregate is allowed).
	// The next hop is this node's address on each peer's session.
	Prefix netip.Prefix
	// Communities are standard communities, each ASN<<16 | value (see ParseCommunity).
	Communities []uint32
	// LargeCommunities are large communities.
	LargeCommunities []LargeCommunity
	// LocalPref, when not zero, is sent as LOCAL_PREF. It means something to iBGP peers only;
	// eBGP routers ignore it (RFC 4271 5.1.5).
	LocalPref uint32
	// Peers, when not empty, are the only peers (by address, of the prefix's family) the prefix
	// is advertised to; empty means every peer of its family. A listed address that is not (yet)
	// a peer is allowed: the prefix goes to it once SetPeers adds it.
	Peers []netip.Addr
}

// ParseCommunity parses a standard community written "ASN:VALUE" (each 0-65535) into its
// 32-bit form.
func ParseCommunity(s string) (uint32, error) {
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("community %q: want ASN:VALUE", s)
	}
	a, err := strconv.ParseUint(hi, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("community %q: ASN part: %w", s, err)
	}
	v, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("community %q: value part: %w", s, err)
	}
	return uint32(a)<<16 | uint32(v), nil
}

// ParseLargeCommunity parses a large community written "ASN:DATA1:DATA2" (each 32 bits).
func ParseLargeCommunity(s string) (LargeCommunity, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return LargeCommunity{}, fmt.Errorf("large community %q: want ASN:DATA1:DATA2", s)
	}
	var v [3]uint32
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return LargeCommunity{}, fmt.Errorf("large community %q: part %d: %w", s, i+1, err)
		}
		v[i] = uint32(n)
	}
	return LargeCommunity{v[0], v[1], v[2]}, nil
}

// validate reports every problem of one peer.
func (p Peer) validate() error {
	var errs []error
	if !p.Address.IsValid() {
		errs = append(errs, errors.New("address: missing"))
	} else if p.Address.Zone() != "" || p.Address.Is4In6() {
		errs = append(errs, fmt.Errorf("address %s: want a plain IPv4 or IPv6 address", p.Address))
	}
	if p.ASN == 0 {
		errs = append(errs, errors.New("asn: missing"))
	}
	if p.MyASN == 0 {
		errs = append(errs, errors.New("myASN: missing"))
	}
	if p.SourceAddress.IsValid() && p.Address.IsValid() && p.SourceAddress.Is4() != p.Address.Is4() {
		errs = append(errs, fmt.Errorf("sourceAddress %s: not the family of %s", p.SourceAddress, p.Address))
	}
	if p.HoldTime != 0 && p.HoldTime < minHoldTime {
		errs = append(errs, fmt.Errorf("holdTime %s: want 0 (default %s) or at least %s", p.HoldTime, DefaultHoldTime, minHoldTime))
	}
	if p.HoldTime%time.Second != 0 || p.KeepaliveTime%time.Second != 0 || p.ConnectRetry%time.Second != 0 {
		errs = append(errs, errors.New("holdTime, keepaliveTime and connectRetry: want whole seconds"))
	}
	if p.KeepaliveTime < 0 || p.ConnectRetry < 0 {
		errs = append(errs, errors.New("keepaliveTime and connectRetry: must not be negative"))
	}
	if hold := p.holdTime(); p.KeepaliveTime > 0 && p.KeepaliveTime >= hold {
		errs = append(errs, fmt.Errorf("keepaliveTime %s: want less than the hold time %s", p.KeepaliveTime, hold))
	}
	if len(p.Password) > 80 {
		errs = append(errs, errors.New("password: longer than the kernel's 80-byte TCP MD5 key"))
	}
	if b := p.BFD; b != nil {
		if b.ReceiveInterval < 0 || b.TransmitInterval < 0 {
			errs = append(errs, errors.New("bfd intervals: must not be negative"))
		}
		if b.ReceiveInterval%time.Microsecond != 0 || b.TransmitInterval%time.Microsecond != 0 ||
			b.ReceiveInterval > maxBFDInterval || b.TransmitInterval > maxBFDInterval {
			errs = append(errs, fmt.Errorf("bfd intervals: want whole microseconds up to %s", maxBFDInterval))
		}
		if p.EBGPMultihopTTL > 1 {
			errs = append(errs, errors.New("bfd: GoBGP's BFD is single-hop only; not with ebgpMultihopTTL"))
		}
	}
	if p.GracefulRestart < 0 || p.GracefulRestart > MaxGracefulRestart || p.GracefulRestart%time.Second != 0 {
		errs = append(errs, fmt.Errorf("gracefulRestart %s: want 0 (off) or whole seconds up to %s", p.GracefulRestart, MaxGracefulRestart))
	}
	if p.EBGPMultihopTTL > 0 && p.ASN == p.MyASN {
		errs = append(errs, errors.New("ebgpMultihopTTL: only for eBGP peers (asn differs from myASN)"))
	}
	return errors.Join(errs...)
}

// maxBFDInterval keeps intervals within BFD's 32-bit microsecond fields.
const maxBFDInterval = time.Duration(1<<32-1) * time.Microsecond

func (p Peer) holdTime() time.Duration {
	if p.HoldTime == 0 {
		return DefaultHoldTime
	}
	return p.HoldTime
}

func (p Peer) keepaliveTime() time.Duration {
	if p.KeepaliveTime == 0 {
		return p.holdTime() / 3
	}
	return p.KeepaliveTime
}

func (p Peer) connectRetry() time.Duration {
	if p.ConnectRetry == 0 {
		return DefaultConnectRetry
	}
	return p.ConnectRetry
}

func (p Peer) port() uint16 {
	if p.Port == 0 {
		return DefaultPort
	}
	return p.Port
}

// equal reports whether two peers configure the same session.
func (p Peer) equal(q Peer) bool {
	pb, qb := p.BFD, q.BFD
	p.BFD, q.BFD = nil, nil
	if p != q || (pb == nil) != (qb == nil) {
		return false
	}
	return pb == nil || *pb == *qb
}

// validatePeers checks every peer and that no address repeats.
func validatePeers(peers []Peer) error {
	var errs []error
	seen := map[netip.Addr]bool{}
	for i, p := range peers {
		if err := p.validate(); err != nil {
			errs = append(errs, fmt.Errorf("peer %d (%s): %w", i, p.Address, err))
			continue
		}
		if seen[p.Address] {
			errs = append(errs, fmt.Errorf("peer %d: address %s given twice", i, p.Address))
		}
		seen[p.Address] = true
	}
	return errors.Join(errs...)
}

// validate reports every problem of one advertisement.
func (a Advertisement) validate() error {
	switch {
	case !a.Prefix.IsValid():
		return errors.New("prefix: missing")
	case a.Prefix.Addr().Is4In6() || a.Prefix.Addr().Zone() != "":
		return fmt.Errorf("prefix %s: want a plain IPv4 or IPv6 prefix", a.Prefix)
	case a.Prefix != a.Prefix.Masked():
		return fmt.Errorf("prefix %s: host bits set (did you mean %s?)", a.Prefix, a.Prefix.Masked())
	}
	for _, p := range a.Peers {
		if !p.IsValid() || p.Zone() != "" || p.Is4In6() || p.Is4() != a.Prefix.Addr().Is4() {
			return fmt.Errorf("peers: %v is not a plain address of the family of %s", p, a.Prefix)
		}
	}
	return nil
}

// sendsTo reports whether a goes to the peer at addr (which must be a peer's address).
func (a Advertisement) sendsTo(addr netip.Addr) bool {
	if addr.Is4() != a.Prefix.Addr().Is4() {
		return false
	}
	return len(a.Peers) == 0 || slices.Contains(a.Peers, addr)
}

// equal reports whether two advertisements announce the same path (to whichever peers).
func (a Advertisement) equal(b Advertisement) bool {
	return a.Prefix == b.Prefix && a.LocalPref == b.LocalPref &&
		slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

// validateAdvertisements checks every advertisement and that no prefix repeats.
func validateAdvertisements(advs []Advertisement) error {
	var errs []error
	seen := map[netip.Prefix]bool{}
	for i, a := range advs {
		if err := a.validate(); err != nil {
			errs = append(errs, fmt.Errorf("advertisement %d: %w", i, err))
			continue
		}
		if seen[a.Prefix] {
			errs = append(errs, fmt.Errorf("advertisement %d: prefix %s given twice", i, a.Prefix))
		}
		seen[a.Prefix] = true
	}
	return errors.Join(errs...)
}
