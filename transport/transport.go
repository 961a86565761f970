package transport

import (
	"errors"

	"github.com/scalestore-go/scalestore/protocol"
)

// MaxPayload bounds the payload of one message: a page.
const MaxPayload = protocol.PageSize

// Errors every transport reports (wrapped with context; test with
// errors.Is).
var (
	// ErrClosed: the transport, or the connection to the peer, is closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer: the node is not part of the cluster the transport
	// was configured with, or is this node itself.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrFrameSize: a frame that is not protocol.FrameSize bytes or a
	// payload longer than MaxPayload.
	ErrFrameSize = errors.New("transport: bad frame or payload size")
	// ErrAccess: a one-sided verb named a region that does not exist, with
	// a wrong key, or outside its bounds.
	ErrAccess = errors.New("transport: remote access denied")
	// ErrMisaligned: an atomic verb on an address that is not 8-byte
	// aligned.
	ErrMisaligned = errors.New("transport: atomic on a misaligned address")
	// ErrPeerDown: the peer stopped answering or its connection failed
	// beyond the transport's retries.
	ErrPeerDown = errors.New("transport: peer down")
)

// Handler receives one message: frame is the 64-byte frame, payload the
// bytes that came with it (nil if none). Both are valid only during the call;
// a handler that keeps them copies them. A transport calls its handler from
// one goroutine per peer at most, so messages of one peer are handled in
// order.
type Handler func(from protocol.NodeID, frame, payload []byte)

// Messenger sends two-sided messages.
type Messenger interface {
	// Self is this node.
	Self() protocol.NodeID
	// Send queues frame (exactly protocol.FrameSize bytes) and payload (at
	// most MaxPayload bytes, may be nil) to node to. Both are copied before
	// Send returns. Send may block while the queue to the peer is full
	// (every queue is bounded); it never blocks forever on a dead peer: it
	// returns an error wrapping ErrPeerDown or ErrClosed.
	Send(to protocol.NodeID, frame, payload []byte) error
}

// Region names registered memory of one node, as a peer addresses it.
type Region struct {
	Node protocol.NodeID
	Key  uint32 // the remote key (an RDMA rkey); a wrong key is ErrAccess
	Len  uint64
}

// OneSided are the one-sided verbs (paper §3.5; SELCC's latch words).
// Offsets are relative to the region's start. The atomics act on a
// little-endian uint64 at an 8-byte aligned offset and return the value
// before the operation; they are atomic with respect to every other atomic
// verb on the same word, from any node, and to the owner's own atomic
// accesses (sync/atomic) of it.
type OneSided interface {
	// Register exposes mem to peers. mem must stay valid and must not move
	// (off-heap memory: an mmap'd page pool or mailbox) until the transport
	// is closed.
	Register(mem []byte) (Region, error)
	// Read copies len(dst) bytes at off of r into dst.
	Read(dst []byte, r Region, off uint64) error
	// Write copies src to off of r. It is ordered after every earlier
	// Write and Send of this node to the same peer.
	Write(r Region, off uint64, src []byte) error
	// CompareAndSwap sets the word at off to new if it holds old.
	CompareAndSwap(r Region, off uint64, old, new uint64) (prev uint64, err error)
	// FetchAndAdd adds delta to the word at off.
	FetchAndAdd(r Region, off uint64, delta uint64) (prev uint64, err error)
}

// Transport is a whole transport of one node.
type Transport interface {
	Messenger
	OneSided
	// Close stops the transport: pending sends fail with ErrClosed, the
	// handler is not called after Close returns.
	Close() error
}

// Allocator is implemented by a transport that can give memory its peers
// reach faster once registered: shm maps such memory into every peer, whose
// one-sided verbs on it are then done by the calling thread itself instead
// of by the owner's reader. The memory is zeroed and stays valid until the
// transport is closed (Close releases it).
type Allocator interface {
	AllocMemory(size int) ([]byte, error)
}
