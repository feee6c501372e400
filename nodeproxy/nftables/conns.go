package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// conns are a Proxier's netlink connections to nf_tables, opened at the first sync and kept
// open between syncs: one for listings (google/nftables), one for transactions and the
// generation (batch), and the connection that builds transactions without a socket (build).
// Closing a NETLINK_NETFILTER socket is not free: when a commit deleted anything (a one-endpoint
// change deletes an element), the kernel makes the socket's release wait until the deleted
// objects are freed, after an RCU grace period (nf_tables flushes its destroy work on every
// release). That wait was most of a one-endpoint change: 8-28 ms in close(2) against 0.1-0.3 ms
// in the commit itself (strace, 1,000 Services, loaded VM). A kept socket lets the kernel free
// them in the background. A connection that fails is closed (reset, or batch on its own
// error), and the next sync dials it again (a failed batch may leave answers unread, or
// messages queued in the library's connection). The agent closes them at exit (Proxier.Close).
//
// # Sending transactions
//
// google/nftables v0.3.0 (the newest release) flags every message of a batch with NLM_F_ACK
// and reads each acknowledgement with its own recvmsg: about 20,000 of them in a full sync at
// 10,000 Services, with a buffer allocated for each (a third of the sync's garbage; upstream
// stopped asking for them after that release), and asks the kernel to echo every new rule. So the library only builds the batch: build's
// Flush hands it to its test seam (WithTestDial), which keeps it (capture), and send writes it
// in one sendmsg without these flags, as nft(8) does; the kernel then answers only for messages
// it refused. The kernel processes a batch inside that sendmsg, so the answer of the
// NFT_MSG_GETGEN request sent next comes after every answer about the batch: reading up to it
// collects the batch's errors and the generation after the commit.
type conns struct {
	nft   *nftables.Conn
	batch *netlink.Conn
	build *nftables.Conn
	// captured is the batch build's last Flush handed over.
	captured []netlink.Message
}

// builder is the connection transactions are built on: its Flush marshals them into
// captured, touching no socket; send sends them.
func (c *conns) builder() *nftables.Conn {
	if c.build == nil {
		// Without AsLasting, New dials nothing and cannot fail.
		c.build, _ = nftables.New(nftables.WithTestDial(c.capture))
	}
	return c.build
}

// capture is build's netlink "socket": it keeps what build sends and answers nothing (the
// library then reads no acknowledgement).
func (c *conns) capture(req []netlink.Message) ([]netlink.Message, error) {
	c.captured = append(c.captured, req...)
	return nil, nil
}

// discard drops what was built and not sent (after an error).
func (c *conns) discard() {
	c.build, c.captured = nil, nil
}

// send sends the transaction built on builder, if any, as one batch and returns the
// generation after it (sent false: there was nothing to send). The error of a refused batch
// joins the kernel's answers.
func (c *conns) send() (gen uint32, sent bool, err error) {
	if err := c.build.Flush(); err != nil { // marshalling errors only
		c.discard()
		return 0, false, fmt.Errorf("building the nf_tables batch: %w", err)
	}
	msgs := c.captured
	c.captured = nil
	if len(msgs) == 0 {
		return 0, false, nil
	}
	nl, err := c.batchConn()
	if err != nil {
		return 0, false, err
	}
	if err := writeBatch(nl, msgs); err != nil {
		c.closeBatch()
		return 0, false, fmt.Errorf("sending the nf_tables batch: %w", err)
	}
	gen, refused, err := c.fence(nl)
	if err != nil {
		return 0, true, err
	}
	if refused != nil {
		return gen, true, fmt.Errorf("nf_tables refused the batch: %w", refused)
	}
	return gen, true, nil
}

// nlmsgHeaderLen is the length of a netlink message header (struct nlmsghdr).
const nlmsgHeaderLen = 16

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// writeBatch sends msgs in one sendmsg, without an acknowledgement or an echo of each (the
// library asks for an echo of every new rule to learn its handle, which the agent does not use:
// it flushes whole chains). They are framed in one buffer of their exact size:
// netlink.Conn.SendMessages grows its buffer message by message, 40 MB of garbage for the
// 15 MB of a full sync at 10,000 Services.
func writeBatch(nl *netlink.Conn, msgs []netlink.Message) error {
	size := 0
	for _, m := range msgs {
		size += nlmsgAlign(nlmsgHeaderLen + len(m.Data))
	}
	buf := make([]byte, 0, size)
	for i, m := range msgs {
		n := nlmsgAlign(nlmsgHeaderLen + len(m.Data))
		buf = binary.NativeEndian.AppendUint32(buf, uint32(n))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(m.Header.Type))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(m.Header.Flags&^(netlink.Acknowledge|netlink.Echo)))
		buf = binary.NativeEndian.AppendUint32(buf, uint32(i+1)) // sequence
		buf = binary.NativeEndian.AppendUint32(buf, 0)           // port: the kernel answers this socket
		buf = append(buf, m.Data...)
		for len(buf)%4 != 0 {
			buf = append(buf, 0)
		}
	}
	rc, err := nl.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	if err := rc.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return sendErr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return sendErr
}

// batchConn is the connection for batches and the generation, dialled if needed.
func (c *conns) batchConn() (*netlink.Conn, error) {
	if c.batch != nil {
		return c.batch, nil
	}
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("opening netfilter netlink connection: %w", err)
	}
	// A full sync's batch is one message of tens of megabytes. Best effort: without the
	// buffer the send fails with ENOBUFS, reported as such. Refusals come without a copy of
	// the refused message (CapAcknowledge), so that even thousands fit the receive buffer
	// (and without extended acknowledgements: the library cannot parse them capped).
	_ = setBuffers(nl)
	_ = nl.SetOption(netlink.CapAcknowledge, true)
	c.batch = nl
	return nl, nil
}

// fenceTimeout bounds the wait for the generation's answer, which the kernel queues as soon as
// it reads the request: only a kernel that dropped it (a full receive buffer) would keep the
// sync waiting.
const fenceTimeout = time.Minute

// fence asks for the generation and reads the answers up to the generation's: refused joins
// the kernel's errors about the batch sent before. err is a failure of the connection (closed).
func (c *conns) fence(nl *netlink.Conn) (gen uint32, refused, err error) {
	fail := func(err error) (uint32, error, error) {
		c.closeBatch()
		return 0, nil, fmt.Errorf("reading the nf_tables generation: %w", err)
	}
	req, err := nl.Send(getGen())
	if err != nil {
		return fail(err)
	}
	if err := nl.SetReadDeadline(time.Now().Add(fenceTimeout)); err != nil {
		return fail(err)
	}
	var refusals []error
	for {
		msgs, err := nl.Receive()
		if err != nil {
			var sys *os.SyscallError
			if errors.As(err, &sys) || errors.Is(err, os.ErrDeadlineExceeded) {
				return fail(err) // the socket's, not an answer
			}
			// An error answer: the kernel refused a message of the batch, or its commit.
			if !slices.ContainsFunc(refusals, func(e error) bool { return e.Error() == err.Error() }) {
				refusals = append(refusals, err)
			}
			continue
		}
		for _, m := range msgs {
			if m.Header.Sequence != req.Header.Sequence {
				continue
			}
			if err := nl.SetReadDeadline(time.Time{}); err != nil {
				return fail(err)
			}
			gen, err := parseGen(m)
			if err != nil {
				return fail(err)
			}
			return gen, errors.Join(refusals...), nil
		}
	}
}

// setBuffers sets the socket's send and receive buffers to socketBuffer.
func setBuffers(nc *netlink.Conn) error {
	rc, err := nc.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) {
		for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, socketBuffer)
		}
	})
}

func getGen() netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
}

// parseGen reads the generation from an NFT_MSG_NEWGEN answer.
func parseGen(m netlink.Message) (uint32, error) {
	if len(m.Data) < 4 {
		return 0, fmt.Errorf("short answer")
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return 0, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID {
			return ad.Uint32(), nil
		}
	}
	return 0, fmt.Errorf("no generation in the answer")
}

// table is the connection for listings, dialled if needed.
func (c *conns) table() (*nftables.Conn, error) {
	if c.nft == nil {
		nc, err := dial(nftables.AsLasting())
		if err != nil {
			return nil, err
		}
		c.nft = nc
	}
	return c.nft, nil
}

// generation reads nf_tables' ruleset generation, which every committed transaction (of any
// table, by anyone) increments by one. A full sync that finds it where the agent's own last
// commit left it knows that nothing changed the agent's table since: no drift to repair.
func (c *conns) generation() (uint32, error) {
	nl, err := c.batchConn()
	if err != nil {
		return 0, err
	}
	gen, refused, err := c.fence(nl)
	if err != nil {
		return 0, err
	}
	if refused != nil {
		// Answers about an earlier batch that send did not wait for: cannot happen.
		return 0, fmt.Errorf("reading the nf_tables generation: unexpected answers: %w", refused)
	}
	return gen, nil
}

// reset closes the listing connection and drops what was built (after an error; the next
// use dials again).
func (c *conns) reset() {
	if c.nft != nil {
		_ = c.nft.CloseLasting()
		c.nft = nil
	}
	c.discard()
}

// closeBatch closes the batch connection (after its own error).
func (c *conns) closeBatch() {
	if c.batch != nil {
		_ = c.batch.Close()
		c.batch = nil
	}
}

// close closes both connections.
func (c *conns) close() error {
	var err error
	if c.nft != nil {
		err = c.nft.CloseLasting()
		c.nft = nil
	}
	if c.batch != nil {
		err = errors.Join(err, c.batch.Close())
		c.batch = nil
	}
	c.discard()
	return err
}
