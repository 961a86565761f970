package bufmgr

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/protocol"
)

// Poison fills the data of dropped frames (every 8 bytes), so a reader that
// skips validation reads a value no writer ever wrote.
const Poison = 0xDEADBEEFDEADBEEF

// Frame is one cache frame: what this node knows about the page in it and
// its ownership (the page itself is Cache.Page). Frames hold no Go pointers
// (the workers parked on a frame and its queued transfers live in the
// cache's side tables), so the collector never scans the frame array. The
// hot path's fields come first; the protocol fields below belong to the
// node runtime, which is the only writer of Mode, Pending and Epoch.
type Frame struct {
	// The hot path's fields, first and together (within the first cache
	// line when the frame array is aligned): read without the node lock.
	Latch    HybridLatch
	key      atomic.Uint64 // tableKey(PID) while in the translation table, else 0
	next     atomic.Int32  // next frame of the bucket chain (index + 1)
	fast     atomic.Uint32 // the mode the hot path may use the frame in; ModeNone: take the slow path
	lastUsed atomic.Uint64 // epoch-based LRU stamp (paper §4.1)

	PID      protocol.PID
	Mode     protocol.Mode // the valid copy this node holds
	Pending  protocol.Mode // mode of the outstanding ownership request, ModeNone if none
	Evicting bool          // the page provider asked the directory to evict it
	Dirty    bool          // written since it was last persisted (informational)
	// Unreadable: the copy held is a page its directory could not read
	// from the SSD (protocol.FlagUnreadable). The frame keeps its mode for
	// the protocol, but every guard on it fails with a *PageError, the hot
	// path stays closed, and the page is never written back.
	Unreadable bool

	entitled int    // waiters granted a turn before queued transfers are served
	grantGen uint64 // entitlements of older grants (or older pages) no longer count
	inTable  bool
	index    int32

	// Protocol state of the node runtime.
	Epoch     uint32 // conflict epoch at which the copy was obtained
	ReqEpoch  uint32 // conflict epoch at which the outstanding request was accepted
	Served    uint32 // copies served from this copy
	AwaitResp bool   // the outstanding request still waits for the directory
	AwaitData bool   // the outstanding request still waits for the page
	AwaitAcks int    // invalidation acknowledgements still due
	ReqStart  int64  // when the outstanding request was issued
}

// Transfer is a request from another node that this frame must serve: a
// copy (Mode shared), a hand-over (Mode exclusive) or an invalidation.
type Transfer struct {
	From       protocol.NodeID
	Mode       protocol.Mode // ModeShared, ModeExclusive; ModeNone for an invalidation
	Epoch      uint32
	K          uint32           // copies to serve first
	Pred       uint32           // acceptance epoch of the copy the transfer is for
	AsGrant    bool             // answer with a TGrant (the directory serves from its own cache)
	GrantSet   protocol.NodeSet // with AsGrant: sharers the requester invalidates
	Invalidate bool
	// AnyCopy: serve from the shared copy held, or awaited (protocol.FlagAnyCopy).
	AnyCopy bool
}

// GivesUp reports whether serving t takes the page away from this node.
func (t *Transfer) GivesUp() bool { return t.Invalidate || t.Mode == protocol.ModeExclusive }

// LastUsed is the frame's LRU stamp.
func (f *Frame) LastUsed() uint64 { return f.lastUsed.Load() }

// slow sends the hot path to the slow path for this frame. Every change
// that narrows what a latch holder may do (a transfer queued, an eviction
// started, the mode lowered, a waiter parked, a request issued) calls it
// before it takes effect; a hot-path holder that latched concurrently sees
// it after latching and backs off (the stores and loads are sequentially
// consistent, so one of the two sides always sees the other).
func (f *Frame) slow() { f.fast.Store(uint32(protocol.ModeNone)) }

// Slow is slow for the node runtime (the protocol side).
func (f *Frame) Slow() { f.slow() }

// Entitled is the number of waiters still owed their turn.
func (f *Frame) Entitled() int { return f.entitled }

// Value reads the register value a page holds (its first 8 bytes).
func Value(data []byte) uint64 { return binary.LittleEndian.Uint64(data) }

// poisonPage is a page of Poison words, copied over dropped frames.
var poisonPage = func() []byte {
	b := make([]byte, protocol.PageSize)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], Poison)
	}
	return b
}()

// poison fills the frame's data with Poison (its first PoisonHead bytes,
// or its first and last PoisonEnds bytes, when one is set).
func (c *Cache) poison(f *Frame) {
	p := c.Page(f)
	if h := c.PoisonHead; h > 0 && h < len(p) {
		copy(p[:h], poisonPage)
		return
	}
	if e := c.PoisonEnds; e > 0 && 2*e < len(p) {
		copy(p[:e], poisonPage)
		copy(p[len(p)-e:], poisonPage)
		return
	}
	copy(p, poisonPage)
}
