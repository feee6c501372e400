package nftables

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// Registers: the 32-bit registers NFT_REG32_00.. hold a concatenated key (address, then
// protocol, then port, each padded to 4 bytes), as nft lays them out.
const (
	reg0 = 8 // unix.NFT_REG32_00
	// rtnLocal is RTN_LOCAL, fib's address type of a local address.
	rtnLocal = 2
)

// family is what differs between the ip and the ip6 table: address length and offsets, the
// set key types, the reject code.
type family struct {
	rules.Family
	table              nftables.TableFamily
	addrLen            uint32 // 4 or 16
	saddrOff, daddrOff uint32
	addrType           nftables.SetDatatype
	natFamily          uint32
	rejectCode         uint8 // ICMP(v6) port unreachable
	loopback           netip.Prefix
}

func familyOf(f rules.Family) family {
	if f == rules.IPv6 {
		return family{Family: f, table: nftables.TableFamilyIPv6, addrLen: 16, saddrOff: 8, daddrOff: 24,
			addrType: nftables.TypeIP6Addr, natFamily: unix.NFPROTO_IPV6, rejectCode: 4, loopback: netip.MustParsePrefix("::1/128")}
	}
	return family{Family: f, table: nftables.TableFamilyIPv4, addrLen: 4, saddrOff: 12, daddrOff: 16,
		addrType: nftables.TypeIPAddr, natFamily: unix.NFPROTO_IPV4, rejectCode: 3, loopback: netip.MustParsePrefix("127.0.0.0/8")}
}

// words is the number of 32-bit registers an address takes.
func (f family) words() uint32 { return f.addrLen / 4 }

// serviceKeyType is address . protocol . port: the key of the service maps.
func (f family) serviceKeyType() nftables.SetDatatype {
	return nftables.MustConcatSetType(f.addrType, nftables.TypeInetProto, nftables.TypeInetService)
}

// endpointType is address . port: the data of an endpoint map.
func (f family) endpointType() nftables.SetDatatype {
	return nftables.MustConcatSetType(f.addrType, nftables.TypeInetService)
}

func hairpinType(f family) nftables.SetDatatype {
	return nftables.MustConcatSetType(f.addrType, f.addrType)
}

var nodePortKeyType = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)

// protoNumber is the IP protocol number of "tcp", "udp" or "sctp".
func protoNumber(p string) byte {
	switch p {
	case "udp":
		return unix.IPPROTO_UDP
	case "sctp":
		return unix.IPPROTO_SCTP
	default:
		return unix.IPPROTO_TCP
	}
}

// serviceKey encodes address . protocol . port as the kernel compares it.
func serviceKey(a netip.Addr, proto string, port uint16) []byte {
	b := append([]byte{}, a.AsSlice()...)
	b = append(b, protoNumber(proto), 0, 0, 0)
	return pad4(binary.BigEndian.AppendUint16(b, port))
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func nodePortKey(proto string, port uint16) []byte {
	return pad4(binary.BigEndian.AppendUint16([]byte{protoNumber(proto), 0, 0, 0}, port))
}

// endpointValue encodes address . port, the value of an endpoints map's element.
func endpointValue(e rules.Endpoint) string {
	var b [20]byte
	out, _ := e.IP.AppendBinary(b[:0]) // 4 or 16 bytes: endpoint addresses carry no zone
	return string(pad4(binary.BigEndian.AppendUint16(out, e.Port)))
}

// loadServiceKey loads daddr . l4proto . th dport into the registers from reg0.
func (f family) loadServiceKey() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOff, Len: f.addrLen},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg0 + f.words()},
		&expr.Payload{DestRegister: reg0 + f.words() + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

// loadNodePortKey loads l4proto . th dport into the registers from reg0.
func loadNodePortKey() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg0},
		&expr.Payload{DestRegister: reg0 + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func vmapLookup(set string) expr.Any {
	return &expr.Lookup{SourceRegister: reg0, SetName: set, IsDestRegSet: true, DestRegister: 0}
}

func verdict(kind expr.VerdictKind, chain string) expr.Any {
	return &expr.Verdict{Kind: kind, Chain: chain}
}

// addrIn matches the source (or destination) address inside p.
func (f family) addrIn(src bool, p netip.Prefix) []expr.Any {
	off := f.daddrOff
	if src {
		off = f.saddrOff
	}
	mask := netip.PrefixFrom(p.Addr(), p.Bits()).Masked()
	m := make([]byte, f.addrLen)
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: f.addrLen},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: f.addrLen, Mask: m, Xor: make([]byte, f.addrLen)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mask.Addr().AsSlice()},
	}
}

// daddrIs matches the destination address a (or, with not, every other one).
func (f family) daddrIs(a netip.Addr, not bool) []expr.Any {
	op := expr.CmpOpEq
	if not {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOff, Len: f.addrLen},
		&expr.Cmp{Op: op, Register: 1, Data: a.AsSlice()},
	}
}

// notLoopbackDst matches destinations outside the loopback range.
func (f family) notLoopbackDst() []expr.Any {
	e := f.addrIn(false, f.loopback)
	e[2].(*expr.Cmp).Op = expr.CmpOpNeq
	return e
}

// fibLocal matches a local source (src) or destination address.
func fibLocal(src bool) []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagSADDR: src, FlagDADDR: !src, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)},
	}
}

func ctStateNew() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// setMark ORs mark into the packet mark.
func setMark(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^mark), Xor: binaryutil.NativeEndian.PutUint32(mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// clearMark clears mark from the packet mark.
func clearMark(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^mark), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// markUnset matches packets without mark.
func markUnset(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mark), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// dnatOne rewrites the destination to e.
func (f family) dnatOne(e rules.Endpoint) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: reg0, Data: e.IP.AsSlice()},
		&expr.Immediate{Register: reg0 + f.words(), Data: binary.BigEndian.AppendUint16(nil, e.Port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.natFamily, RegAddrMin: reg0, RegProtoMin: reg0 + f.words(), Specified: true},
	}
}

// dnatMap picks one of the n endpoints of the chain whose range in the endpoints map set starts
// at base (numgen random mod n offset base -> address . port) and rewrites the destination to it.
func (f family) dnatMap(set string, base uint32, n int) []expr.Any {
	return []expr.Any{
		&expr.Numgen{Register: reg0, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM, Offset: base},
		&expr.Lookup{SourceRegister: reg0, SetName: set, IsDestRegSet: true, DestRegister: reg0 + 1},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.natFamily, RegAddrMin: reg0 + 1, RegProtoMin: reg0 + 1 + f.words(), Specified: true},
	}
}

// endpointKey is the endpoints map's key of the endpoint at index i of the range at base:
// numgen writes its value in host byte order.
func endpointKey(base uint32, i int) string {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], base+uint32(i))
	return string(b[:])
}

func (f family) reject() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: f.rejectCode}}
}

// hairpinMatch matches saddr . daddr in the hairpin set (a local endpoint reaching itself).
func (f family) hairpinMatch() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: f.addrLen},
		&expr.Payload{DestRegister: reg0 + f.words(), Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOff, Len: f.addrLen},
		&expr.Lookup{SourceRegister: reg0, SetName: setHairpin},
	}
}

func hairpinKey(a netip.Addr) []byte { return append(a.AsSlice(), a.AsSlice()...) }

// saddrIn matches the source address in the set (an affinity set).
func (f family) saddrIn(set string) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: f.addrLen},
		&expr.Lookup{SourceRegister: reg0, SetName: set},
	}
}

// remember adds (or refreshes) the source address in the affinity set, with its timeout.
func (f family) remember(set string, timeout time.Duration) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg0, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrOff, Len: f.addrLen},
		&expr.Dynset{SrcRegKey: reg0, SetName: set, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: timeout},
	}
}

// numgenVmap jumps to one of n chains at random through the anonymous verdict map set.
func numgenVmap(set *nftables.Set, n int) []expr.Any {
	return []expr.Any{
		&expr.Numgen{Register: reg0, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: reg0, SetName: set.Name, SetID: set.ID, IsDestRegSet: true, DestRegister: 0},
	}
}

// affinitySet is an affinity set: the client addresses sent to one endpoint, each for the
// Service's timeout.
func (f family) affinitySet(t *nftables.Table, a *affinity) *nftables.Set {
	return &nftables.Set{Table: t, Name: a.set, Dynamic: true, HasTimeout: true, Timeout: a.timeout, KeyType: f.addrType}
}
