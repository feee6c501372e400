package reference

import (
	"math"
	"net/netip"

	"github.com/portico-lb/portico/providers"
)

// pool hands out the addresses of one prefix. It allocates next-fit: the cursor moves on after
// every allocation, so a freed address is reused only once the pool wraps around, which keeps a
// just-deleted Service's address from reappearing on another Service at once. Callers hold
// Provider.mu.
type pool struct {
	prefix      netip.Prefix
	first, last netip.Addr // usable range, inclusive
	size        uint64     // usable addresses, saturated at math.MaxUint64
	cursor      netip.Addr // where the next search starts
	owner       map[netip.Addr]providers.Ref
}

func newPool(prefix netip.Prefix) *pool {
	prefix = prefix.Masked()
	first, last := prefix.Addr(), lastAddr(prefix)
	hostBits := prefix.Addr().BitLen() - prefix.Bits()
	size, skipped := uint64(math.MaxUint64), uint64(0)
	switch {
	case prefix.Addr().Is4() && prefix.Bits() <= 30:
		// Skip the network and broadcast addresses.
		first, last, skipped = first.Next(), last.Prev(), 2
	case prefix.Addr().Is6() && prefix.Bits() <= 126:
		// Skip the subnet-router anycast address (RFC 4291 2.6.1).
		first, skipped = first.Next(), 1
	}
	if hostBits < 64 {
		size = uint64(1)<<hostBits - skipped
	}
	return &pool{
		prefix: prefix,
		first:  first,
		last:   last,
		size:   size,
		cursor: first,
		owner:  map[netip.Addr]providers.Ref{},
	}
}

// contains reports whether a is an address the pool can hand out.
func (pl *pool) contains(a netip.Addr) bool {
	return pl.first.Compare(a) <= 0 && a.Compare(pl.last) <= 0
}

// next returns a free address without taking it, or false if the pool is full.
func (pl *pool) next() (netip.Addr, bool) {
	if uint64(len(pl.owner)) >= pl.size {
		return netip.Addr{}, false
	}
	// At most len(owner) addresses are taken, so a free one is found within len(owner)+1 steps.
	for a := pl.cursor; ; a = pl.after(a) {
		if _, used := pl.owner[a]; !used {
			return a, true
		}
	}
}

// take marks a as owned by ref. With fresh (a came from next) the cursor moves past a.
func (pl *pool) take(a netip.Addr, ref providers.Ref, fresh bool) {
	pl.owner[a] = ref
	if fresh {
		pl.cursor = pl.after(a)
	}
}

// free releases a if ref owns it.
func (pl *pool) free(a netip.Addr, ref providers.Ref) {
	if pl.owner[a] == ref {
		delete(pl.owner, a)
	}
}

// after returns the address following a, wrapping from last to first.
func (pl *pool) after(a netip.Addr) netip.Addr {
	if a == pl.last {
		return pl.first
	}
	return a.Next()
}

// lastAddr returns the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}
