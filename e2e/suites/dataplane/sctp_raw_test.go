package dataplane_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

// This kernel has no SCTP stack (CONFIG_IP_SCTP unset) but its netfilter tracks and NATs SCTP
// (CONFIG_NF_CT_PROTO_SCTP). So the SCTP tests speak SCTP at the packet level over raw IPv4
// sockets (protocol 132): the client sends a hand-built INIT chunk, the backend reads what
// arrives. That is enough to prove the agent's SCTP rules on real packets: conntrack takes an
// INIT with a valid CRC32c as a new association, and DNAT/SNAT rewrite its ports and addresses
// and recompute the checksum.

const (
	protoSCTP    = 132 // IPPROTO_SCTP
	sctpInitType = 1   // chunk type of INIT
	sctpHdrLen   = 12  // common header: ports, verification tag, checksum
	sctpInitLen  = 20  // INIT chunk without parameters
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpChecksum is the CRC32c of an SCTP packet (RFC 4960 section 6.8 and Appendix B), computed
// with the checksum field as zero, in the byte order of the field: SCTP (like iSCSI, RFC 3309)
// transmits the reflected CRC's least significant byte first, so the value Go's crc32 returns
// goes into the field little-endian. TestSCTPChecksum checks this against RFC 3720's vectors.
func sctpChecksum(pkt []byte) uint32 {
	b := append([]byte(nil), pkt...)
	clear(b[8:12])
	return crc32c(b)
}

// crc32c is the CRC32c of b, the value whose little-endian bytes are sent.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// sctpChecksumOK reports whether pkt's checksum field holds its CRC32c.
func sctpChecksumOK(pkt []byte) bool {
	return len(pkt) >= sctpHdrLen && binary.LittleEndian.Uint32(pkt[8:12]) == sctpChecksum(pkt)
}

// sctpInit is an SCTP packet holding one INIT chunk, as an endpoint opening an association
// sends it: verification tag 0, initiate tag tag (nonzero), no parameters.
func sctpInit(src, dst uint16, tag uint32) []byte {
	b := make([]byte, sctpHdrLen+sctpInitLen)
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	// b[4:8], the verification tag, stays 0: an INIT must carry 0.
	c := b[sctpHdrLen:]
	c[0] = sctpInitType
	c[1] = 0 // flags
	binary.BigEndian.PutUint16(c[2:], sctpInitLen)
	binary.BigEndian.PutUint32(c[4:], tag)               // initiate tag
	binary.BigEndian.PutUint32(c[8:], 1<<16)             // advertised receiver window credit
	binary.BigEndian.PutUint16(c[12:], 1)                // outbound streams
	binary.BigEndian.PutUint16(c[14:], 1)                // inbound streams
	binary.BigEndian.PutUint32(c[16:], tag^0x5ca1ab1e|1) // initial TSN
	binary.LittleEndian.PutUint32(b[8:], sctpChecksum(b))
	return b
}

// sctpAssoc identifies one INIT sent by a test: a random source port and initiate tag, so that
// the backend and the client pick out their own packets.
type sctpAssoc struct {
	SrcPort uint16
	Tag     uint32
}

func newSCTPAssoc() sctpAssoc {
	return sctpAssoc{SrcPort: uint16(20000 + rand.IntN(30000)), Tag: rand.Uint32()%0xfffffffe + 1}
}

// rawSocket opens a raw IPv4 socket for proto inside h's namespace.
func rawSocket(h *netlab.Host, proto int) (int, error) {
	fd := -1
	err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("raw socket (protocol %d) in %s: %w", proto, h.Name, err)
	}
	return fd, nil
}

// sendSCTPInit sends a's INIT from h to dst; the kernel adds the IPv4 header and picks the
// source address.
func sendSCTPInit(h *netlab.Host, dst netip.AddrPort, a sctpAssoc) error {
	fd, err := rawSocket(h, protoSCTP)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, sctpInit(a.SrcPort, dst.Port(), a.Tag), 0, &unix.SockaddrInet4{Addr: dst.Addr().As4()}); err != nil {
		return fmt.Errorf("sending SCTP INIT from %s to %s: %w", h.Name, dst, err)
	}
	return nil
}

// ipv4Payload splits a received IPv4 packet (raw IPv4 sockets deliver the header) into its
// addresses, protocol and payload.
func ipv4Payload(b []byte) (src, dst netip.Addr, proto byte, payload []byte, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if ihl < 20 || total < ihl || len(b) < ihl {
		return
	}
	if total > len(b) {
		total = len(b) // an ICMP error quotes a truncated packet
	}
	return netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20])), b[9], b[ihl:total], true
}

// sctpArrival is an INIT as the backend received it.
type sctpArrival struct {
	Src, Dst   netip.AddrPort
	VTag       uint32 // verification tag of the common header
	ChecksumOK bool   // the CRC32c is valid as received (after NAT rewrote the packet)
}

// sctpSniffer collects, by initiate tag, the SCTP INITs arriving in a namespace. The kernel there
// has no SCTP stack; a raw socket still gets a copy of every SCTP packet delivered locally.
type sctpSniffer struct {
	fd   int
	stop atomic.Bool
	done chan struct{}

	mu   sync.Mutex
	seen map[uint32]sctpArrival
	err  error
}

// sniffSCTP starts collecting the SCTP INITs h receives until the test ends.
func sniffSCTP(t *testing.T, h *netlab.Host) *sctpSniffer {
	t.Helper()
	fd, err := rawSocket(h, protoSCTP)
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	s := &sctpSniffer{fd: fd, done: make(chan struct{}), seen: map[uint32]sctpArrival{}}
	go s.run()
	t.Cleanup(func() {
		s.stop.Store(true)
		<-s.done // the reader returns within one receive timeout; only then close the fd
		unix.Close(fd)
	})
	return s
}

func (s *sctpSniffer) run() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for !s.stop.Load() {
		n, _, err := unix.Recvfrom(s.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		src, dst, proto, p, ok := ipv4Payload(buf[:n])
		if !ok || proto != protoSCTP || len(p) < sctpHdrLen+sctpInitLen || p[sctpHdrLen] != sctpInitType {
			continue
		}
		a := sctpArrival{
			Src:        netip.AddrPortFrom(src, binary.BigEndian.Uint16(p[0:2])),
			Dst:        netip.AddrPortFrom(dst, binary.BigEndian.Uint16(p[2:4])),
			VTag:       binary.BigEndian.Uint32(p[4:8]),
			ChecksumOK: sctpChecksumOK(p),
		}
		s.mu.Lock()
		s.seen[binary.BigEndian.Uint32(p[sctpHdrLen+4:])] = a
		s.mu.Unlock()
	}
}

// wait returns the INIT with initiate tag tag once it arrived, or false after timeout.
func (s *sctpSniffer) wait(tag uint32, timeout time.Duration) (sctpArrival, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		a, ok := s.seen[tag]
		err := s.err
		s.mu.Unlock()
		if ok || err != nil || time.Now().After(deadline) {
			return a, ok, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sctpUnreachable is an ICMP destination unreachable quoting one of our INITs.
type sctpUnreachable struct {
	From netip.Addr // sender of the ICMP message
	Code byte       // 3: port unreachable
}

// awaitSCTPUnreachable sends a's INIT from h to dst and waits up to timeout for an ICMP
// destination unreachable quoting it (same source port, destination and verification tag).
func awaitSCTPUnreachable(h *netlab.Host, dst netip.AddrPort, a sctpAssoc, timeout time.Duration) (sctpUnreachable, error) {
	fd, err := rawSocket(h, unix.IPPROTO_ICMP)
	if err != nil {
		return sctpUnreachable{}, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return sctpUnreachable{}, err
	}
	if err := sendSCTPInit(h, dst, a); err != nil {
		return sctpUnreachable{}, err
	}
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return sctpUnreachable{}, err
		}
		from, _, proto, icmp, ok := ipv4Payload(buf[:n])
		if !ok || proto != unix.IPPROTO_ICMP || len(icmp) < 8 || icmp[0] != 3 { // destination unreachable
			continue
		}
		_, qdst, qproto, q, ok := ipv4Payload(icmp[8:])
		if !ok || qproto != protoSCTP || len(q) < 8 {
			continue
		}
		if binary.BigEndian.Uint16(q[0:2]) != a.SrcPort || binary.BigEndian.Uint16(q[2:4]) != dst.Port() ||
			qdst != dst.Addr() || binary.BigEndian.Uint32(q[4:8]) != 0 {
			continue
		}
		return sctpUnreachable{From: from, Code: icmp[1]}, nil
	}
	return sctpUnreachable{}, fmt.Errorf("no ICMP unreachable for the INIT from %s to %s (port %d, tag %#x) within %s",
		h.Name, dst, a.SrcPort, a.Tag, timeout)
}
