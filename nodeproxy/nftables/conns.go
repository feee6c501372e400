package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// conns are a Proxier's netlink connections to nf_tables, opened at the first sync and kept
// open between syncs: one for transactions and listings, one for reading the generation.
// Closing a NETLINK_NETFILTER socket is not free: when a commit deleted anything (a one-endpoint
// change deletes an element), the kernel makes the socket's release wait until the deleted
// objects are freed, after an RCU grace period (nf_tables flushes its destroy work on every
// release). That wait was most of a one-endpoint change: 8-28 ms in close(2) against 0.1-0.3 ms
// in the commit itself (strace, 1,000 Services, loaded VM). A kept socket lets the kernel free
// them in the background. A connection that fails is closed (reset, or generation on its own
// error), and the next sync dials it again (a failed batch may leave answers unread, or
// messages queued in the library's connection). The agent closes both at exit (Proxier.Close).
type conns struct {
	nft *nftables.Conn
	gen *netlink.Conn
}

// table is the connection for transactions and listings, dialled if needed.
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
	if c.gen == nil {
		nc, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
		if err != nil {
			return 0, fmt.Errorf("opening netfilter netlink connection: %w", err)
		}
		c.gen = nc
	}
	msgs, err := c.gen.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		_ = c.gen.Close()
		c.gen = nil
		return 0, fmt.Errorf("reading the nf_tables generation: %w", err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("reading the nf_tables generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, fmt.Errorf("reading the nf_tables generation: no generation in the answer")
}

// reset closes the transaction connection (after an error; the next use dials again).
func (c *conns) reset() {
	if c.nft != nil {
		_ = c.nft.CloseLasting()
		c.nft = nil
	}
}

// close closes both connections.
func (c *conns) close() error {
	var err error
	if c.nft != nil {
		err = c.nft.CloseLasting()
		c.nft = nil
	}
	if c.gen != nil {
		err = errors.Join(err, c.gen.Close())
		c.gen = nil
	}
	return err
}
