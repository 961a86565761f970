package ibverbs

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Config configures one node's RDMA transport.
type Config struct {
	// Self is this node.
	Self protocol.NodeID
	// Addrs maps every node of the cluster, Self included, to the TCP
	// address of its out-of-band listener. A node dials the nodes with
	// lower ids and accepts the higher ones.
	Addrs map[protocol.NodeID]string
	// Listener, if set, is Self's already bound listener (tests bind
	// 127.0.0.1:0 first); the transport closes it once every peer is
	// connected.
	Listener net.Listener
	// Handler receives the messages.
	Handler transport.Handler

	// Mailboxes is the number of mailbox slots a node keeps for each
	// peer: how many messages may be in flight from one node to another
	// before Send waits for the receiver (paper §3.5: one private mailbox
	// per worker at every remote message handler, so set it to the number
	// of workers plus page providers). Default 16, at most MaxMailboxes;
	// all nodes must agree.
	Mailboxes int
	// OneSidedBuffers bounds the one-sided verbs in flight on this node
	// (each holds one registered bounce buffer of OneSidedChunk bytes).
	// Default 16.
	OneSidedBuffers int

	// Device names the RDMA device (ibv_devices lists them); empty: the
	// first one. Port is its port (default 1). Used by Open only.
	Device string
	Port   int
	// UseGIDIndex makes the port use GID table entry GIDIndex (show_gids
	// lists them) as its source address, with a global route header.
	// Unset (the zero value): InfiniBand routes by LID, RoCE takes the
	// first RoCE v2 GID with an IPv4 address (else the first RoCE v2, else
	// RoCE v1).
	UseGIDIndex bool
	GIDIndex    int
	// MTU caps the path MTU in bytes (256..4096); 0: the port's active
	// MTU. Both ends use the smaller of their two values.
	MTU int

	// ConnectTimeout bounds the out-of-band setup (default 30 s).
	ConnectTimeout time.Duration
	// PeerTimeout bounds a wait on a peer: a Send with every mailbox slot
	// full, a one-sided verb, a queue-pair re-connection (default 10 s).
	PeerTimeout time.Duration
	// BusyPoll keeps the pollers spinning instead of backing off to short
	// sleeps when idle: lowest latency, one busy core per poller.
	BusyPoll bool
}

// MaxMailboxes bounds Config.Mailboxes.
const MaxMailboxes = 1024

// OneSidedChunk is the size of a one-sided bounce buffer: larger reads and
// writes go in chunks of this size.
const OneSidedChunk = 16 << 10

// Mailbox slot layout. A message is one RDMA write that ends at the end of
// its slot:
//
//	[ ... payload (right-aligned) | frame (64) | trailer (8) ]
//
// The trailer is one aligned little-endian word: payload length (16 bits),
// flags (8, zero), the message's sequence number (32) and the doorbell byte
// last. Right-aligning the payload keeps the doorbell at a fixed place, so
// the poller checks one word per slot, and keeps the write a single
// contiguous one, so the doorbell is the last byte the NIC places.
const (
	trailerSize = 8
	slotSize    = (transport.MaxPayload + protocol.FrameSize + trailerSize + 63) / 64 * 64
	doorbell    = 0xA5
)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.Mailboxes == 0 {
		cfg.Mailboxes = 16
	}
	if cfg.OneSidedBuffers == 0 {
		cfg.OneSidedBuffers = 16
	}
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = 10 * time.Second
	}
	switch {
	case cfg.Handler == nil:
		return cfg, errors.New("ibverbs: config has no handler")
	case cfg.Mailboxes < 1 || cfg.Mailboxes > MaxMailboxes:
		return cfg, fmt.Errorf("ibverbs: %d mailboxes per peer (1..%d)", cfg.Mailboxes, MaxMailboxes)
	case cfg.OneSidedBuffers < 1 || cfg.OneSidedBuffers > 1024:
		return cfg, fmt.Errorf("ibverbs: %d one-sided buffers (1..1024)", cfg.OneSidedBuffers)
	case cfg.ConnectTimeout < 0 || cfg.PeerTimeout < 0:
		return cfg, errors.New("ibverbs: negative timeout")
	case cfg.MTU != 0 && !validMTU(uint16(cfg.MTU)):
		return cfg, fmt.Errorf("ibverbs: MTU %d (256, 512, 1024, 2048 or 4096)", cfg.MTU)
	case cfg.UseGIDIndex && (cfg.GIDIndex < 0 || cfg.GIDIndex > 255):
		return cfg, fmt.Errorf("ibverbs: GID index %d (0..255)", cfg.GIDIndex)
	}
	if _, ok := cfg.Addrs[cfg.Self]; !ok && cfg.Listener == nil && len(cfg.Addrs) > 0 {
		return cfg, fmt.Errorf("ibverbs: node %d has no address in the cluster map", cfg.Self)
	}
	return cfg, nil
}
