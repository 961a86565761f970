package linecache

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/transport"
)

// Poster issues one-sided verbs without waiting: done runs when the verb
// completed. Verbs to the same node act in the order they were posted (an
// RC queue pair), so a READ posted after an atomic sees memory after it, and
// an FAA posted after a WRITE completes after the WRITE landed. The
// simulator's World is one; a blocking transport.OneSided is one through
// Sequential.
type Poster interface {
	Read(dst []byte, r transport.Region, off uint64, done func(error))
	Write(r transport.Region, off uint64, src []byte, done func(error))
	CompareAndSwap(r transport.Region, off, old, new uint64, done func(prev uint64, err error))
	FetchAndAdd(r transport.Region, off, delta uint64, done func(prev uint64, err error))
}

// Waiter is how a thread waits: Park until Wake (a Wake before the Park
// is not lost), Sleep for simulated or real nanoseconds, and MaybeYield
// at a point where a concurrent thread may run (the simulator decides).
type Waiter interface {
	Park()
	Wake()
	Sleep(ns int64)
	MaybeYield()
}

// Thread is one thread of a compute node: an application worker, or the
// node's invalidation handler.
type Thread struct {
	P Waiter
	// Slot is the thread's reply slot in its node's reply region (workers
	// only: the handler sends no invalidations).
	Slot int

	// Misses counts this thread's accesses that needed a remote acquire,
	// MissNanos is how long the last one took (Config.Now): its verbs and
	// the cache's work between them, invalidations and retries included.
	Misses    uint64
	MissNanos int64

	pending int   // verbs posted and not completed
	parked  bool  // waiting for pending to reach 0
	err     error // the first verb error since the last wait
}

// Mutations break one protocol rule each, on purpose, when their function
// says so (the simulator's mutants; nil: never).
type Mutations struct {
	// SkipUndo: a reader whose FAA found a holder leaves its bit set.
	SkipUndo func() bool
	// HandOverWithoutFAA: a holder forwards its Modified line to a writer
	// without moving the latch word's holder field.
	HandOverWithoutFAA func() bool
	// ShareWithoutFlush: a holder that turns its line into shared copies
	// does not write it back, so later readers read memory's stale copy.
	ShareWithoutFlush func() bool
	// ReleaseKeepsCopy: a reader that releases its bit for a writer keeps
	// reading its copy.
	ReleaseKeepsCopy func() bool
	// EvictWithoutFlush: the eviction of a dirty Modified line releases
	// the latch without writing the line back.
	EvictWithoutFlush func() bool
	// RoundRestarts: an access restarts its reply slot's rounds at 0, as a
	// new Thread on a used slot did before rounds belonged to the slot, so
	// a status word left by an older round passes for this round's reply.
	RoundRestarts func() bool
}

// Config configures one compute node's cache.
type Config struct {
	Self selcc.Node      // this compute node in the latch words
	ID   protocol.NodeID // this node on the transport
	// Computes maps every compute node of the latch words to its
	// transport node, Replies to its reply region.
	Computes []protocol.NodeID
	Replies  []transport.Region
	// ReplyMem is this node's own reply region (registered as
	// Replies[Self]); its length must be a multiple of 8 and its start
	// 8-byte aligned.
	ReplyMem []byte
	// Memory maps a memory node (a line's PID.Dir()) to its region.
	Memory map[protocol.NodeID]transport.Region
	Frames int // cache frames; more than the node's threads
	// FrameMem, when set, holds the frames' data (at least Frames *
	// LineSize bytes; a runtime passes memory it populated, as RDMA
	// registers a cache's buffers); nil: the Go heap.
	FrameMem []byte
	Threads  int // application threads (P of the lease, §5.3.1)
	// Gamma is the local-handover threshold (§5.3.1); 0 turns it off.
	Gamma float64
	// Priority turns on the reader hold-off for starved writers (§5.3.2).
	Priority bool
	// RTT is an atomic's round trip, for the retry interval (§5.1.2), and
	// PollEvery how often a waiting sender looks at its reply slot (below
	// 0: it waits until the runtime calls Landed, as the simulator does).
	RTT, PollEvery int64
	// UpgradeTries is how many failed upgrade CASes fall back to release
	// and acquire (§4.3.2).
	UpgradeTries int
	// Inbox bounds the invalidations waiting for the handler: every
	// sending thread of the cluster has at most one in flight to a node.
	Inbox int

	Post      Poster
	Send      func(m *protocol.Message) error
	Now       func() int64
	Mutations Mutations
	// OnMemo, when set, hears of every memo change (the checks look at
	// the lines that changed).
	OnMemo func(line protocol.PID)
}

// Stats counts what a cache did. Its threads update it atomically; read
// it once they stopped, or field by field with sync/atomic.
type Stats struct {
	Hits, Misses      uint64
	Acquires          uint64 // remote acquire attempts (verb rounds)
	Upgrades          uint64
	UpgradeFallbacks  uint64
	Invalidations     uint64 // invalidation messages sent
	Dropped           uint64 // replies that said dropped
	HandOvers         uint64 // ownership handed over by this node
	Releases          uint64 // shared copies released for a writer
	Evictions         uint64
	LeaseReleases     uint64 // lines given up by the lease (§5.3.1)
	Reads, Writes     uint64 // READ and WRITE verbs posted
	Atomics           uint64 // CAS and FAA verbs posted
	HandlerCalls      uint64 // invalidations handled
	HoldOffs          uint64 // reader acquires held off for a starved writer
	Failed            uint64 // accesses that ended with an error
	MaxWaitRetries    uint64 // the most retries one acquire needed
	BytesFromMemory   uint64
	BytesToMemory     uint64
	BytesForwarded    uint64
	InvalidationsRecv uint64
}

// frame is a cached line.
type frame struct {
	line protocol.PID
	memo selcc.Memo
	data []byte
	used bool // in the table (false: free)

	dirty   bool
	readers int  // local shared latch holders
	writer  bool // local exclusive latch holder
	remote  bool // one thread is acquiring, releasing or handing over the line
	waiters []*Thread
	ref     bool // clock bit

	// The lease (§5.3.1): counting starts when an invalidation was dropped
	// because the line was in local use.
	contended bool
	rc, wc    int
	// holdOff delays this node's shared acquires of the line while a
	// starved writer wants it (§5.3.2).
	holdOff int64
}

func (f *frame) busy() bool { return f.remote || f.readers > 0 || f.writer }

// Cache is one compute node's cache of global cache lines.
type Cache struct {
	cfg Config

	mu      sync.Mutex
	frames  []frame
	table   map[protocol.PID]*frame
	hand    int
	waiting []*Thread // threads waiting for a free frame

	inbox   []protocol.Message // ring
	head, n int
	handler *Thread // parked in Serve while the inbox is empty
	idle    bool
	// serving is held while one invalidation is handled, by Serve or by
	// a worker in ServeWaiting: the node answers one at a time, in
	// arrival order, whichever goroutine runs the answer.
	serving sync.Mutex
	// inline counts workers between BeginInline and EndInline: Deliver
	// does not wake the handler for them, EndInline does if one is left.
	inline  int
	polling []*Thread // by reply slot: a sender waiting for Landed
	// rounds is the last invalidation round of each reply slot. It belongs
	// to the slot, not to the thread using it: the status words of older
	// rounds stay in the slot, and a round number that came back (a new
	// thread counting from 0) would take one of them for its own reply.
	rounds    []uint32
	slotInUse []bool // a thread is waiting for replies in the slot

	Stats Stats
}

// ErrLost is a protocol state that cannot happen: the latch word and the
// node's memo disagree in a way no transition explains.
var ErrLost = errors.New("linecache: lost ownership")

// New makes a compute node's cache.
func New(cfg Config) (*Cache, error) {
	switch {
	case cfg.Frames < 2:
		return nil, fmt.Errorf("linecache: %d frames: want at least 2", cfg.Frames)
	case int(cfg.Self) >= len(cfg.Computes) || len(cfg.Computes) > selcc.MaxNodes:
		return nil, fmt.Errorf("linecache: compute node %d of %d (at most %d)", cfg.Self, len(cfg.Computes), selcc.MaxNodes)
	case len(cfg.Replies) != len(cfg.Computes):
		return nil, fmt.Errorf("linecache: %d reply regions for %d compute nodes", len(cfg.Replies), len(cfg.Computes))
	case len(cfg.ReplyMem)%8 != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(cfg.ReplyMem)))%8 != 0:
		return nil, errors.New("linecache: the reply region must be 8-byte aligned")
	case cfg.Inbox < 1:
		return nil, errors.New("linecache: an inbox of at least 1 message")
	}
	if cfg.UpgradeTries < 1 {
		cfg.UpgradeTries = 3
	}
	if cfg.PollEvery == 0 {
		cfg.PollEvery = 200
	}
	c := &Cache{cfg: cfg, frames: make([]frame, cfg.Frames), table: make(map[protocol.PID]*frame, cfg.Frames),
		inbox: make([]protocol.Message, cfg.Inbox), polling: make([]*Thread, len(cfg.ReplyMem)/SlotSize),
		rounds: make([]uint32, len(cfg.ReplyMem)/SlotSize), slotInUse: make([]bool, len(cfg.ReplyMem)/SlotSize)}
	data := cfg.FrameMem
	if data == nil {
		data = make([]byte, cfg.Frames*LineSize)
	} else if len(data) < cfg.Frames*LineSize {
		return nil, fmt.Errorf("linecache: %d bytes of frame memory for %d frames", len(data), cfg.Frames)
	}
	for i := range c.frames {
		c.frames[i].data = data[i*LineSize : (i+1)*LineSize : (i+1)*LineSize]
	}
	return c, nil
}

// Self is this node in the latch words.
func (c *Cache) Self() selcc.Node { return c.cfg.Self }

// Memo is this node's memo of line (Invalid when not cached), for the
// checks.
func (c *Cache) Memo(line protocol.PID) selcc.Memo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.table[line]; f != nil {
		return f.memo
	}
	return selcc.Invalid
}

// Copy is this node's data of line if it holds a valid copy that no local
// thread is changing, for the checks.
func (c *Cache) Copy(line protocol.PID) ([]byte, selcc.Memo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.table[line]
	if f == nil || f.memo == selcc.Invalid || f.writer || f.remote {
		return nil, selcc.Invalid, false
	}
	return f.data, f.memo, true
}

// Quiet reports whether no thread is inside the cache and no invalidation
// waits.
func (c *Cache) Quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n > 0 || len(c.waiting) > 0 {
		return false
	}
	for i := range c.frames {
		if f := &c.frames[i]; f.busy() || len(f.waiters) > 0 {
			return false
		}
	}
	return true
}

// Describe lists the frames with work in flight, for a stuck run.
func (c *Cache) Describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf("node %d: inbox %d, %d waiting for a frame", c.cfg.Self, c.n, len(c.waiting))
	for i := range c.frames {
		f := &c.frames[i]
		if f.used && (f.busy() || len(f.waiters) > 0) {
			s += fmt.Sprintf("; %v %v readers=%d writer=%v remote=%v waiters=%d", f.line, f.memo, f.readers, f.writer, f.remote, len(f.waiters))
		}
	}
	return s
}

// Access runs fn on line's data under the local latch that access a
// needs, after acquiring the global ownership it needs (§4.2-4.4). fn must
// not keep data.
func (c *Cache) Access(t *Thread, line protocol.PID, a selcc.Access, fn func(data []byte)) error {
	if _, ok := c.cfg.Memory[line.Dir()]; !ok {
		return fmt.Errorf("linecache: line %v: no memory node %d", line, line.Dir())
	}
	if t.Slot < 0 || t.Slot >= len(c.rounds) {
		return fmt.Errorf("linecache: reply slot %d of a node with %d", t.Slot, len(c.rounds))
	}
	c.mu.Lock()
	if fire(c.cfg.Mutations.RoundRestarts) {
		c.rounds[t.Slot] = 0
	}
	waited := false
	for {
		f := c.table[line]
		if f == nil {
			var err error
			if f, err = c.claim(t, line); err != nil {
				atomic.AddUint64(&c.Stats.Failed, 1)
				c.mu.Unlock()
				return err
			}
			if f == nil {
				waited = true
				continue // waited for a frame
			}
		}
		step := selcc.Need(f.memo, a)
		conflict := f.remote || f.writer || a == selcc.Write && f.readers > 0 || step != selcc.Hit && f.readers > 0
		if conflict {
			c.wait(t, &f.waiters)
			waited = true
			if f.contended {
				if a == selcc.Write {
					f.wc++
				} else {
					f.rc++
				}
			}
			continue
		}
		if step == selcc.Hit {
			if !waited {
				f.contended, f.rc, f.wc = false, 0, 0
			}
			atomic.AddUint64(&c.Stats.Hits, 1)
			f.ref = true
			if a == selcc.Write {
				f.writer, f.dirty = true, true
			} else {
				f.readers++
			}
			c.mu.Unlock()
			fn(f.data)
			c.mu.Lock()
			if a == selcc.Write {
				f.writer = false
			} else {
				f.readers--
			}
			err := c.afterAccess(t, f)
			c.wakeAll(&f.waiters)
			c.mu.Unlock()
			return err
		}
		atomic.AddUint64(&c.Stats.Misses, 1)
		t.Misses++
		f.remote = true
		c.mu.Unlock()
		began := c.cfg.Now()
		err := c.acquire(t, f, step)
		t.MissNanos = c.cfg.Now() - began
		c.mu.Lock()
		f.remote = false
		c.wakeAll(&f.waiters)
		if err != nil {
			atomic.AddUint64(&c.Stats.Failed, 1)
			c.mu.Unlock()
			return err
		}
	}
}

// wait parks t on q; c.mu is released while it waits.
func (c *Cache) wait(t *Thread, q *[]*Thread) {
	*q = append(*q, t)
	c.mu.Unlock()
	t.P.Park()
	c.mu.Lock()
}

func (c *Cache) wakeAll(q *[]*Thread) {
	for _, t := range *q {
		t.P.Wake()
	}
	*q = (*q)[:0]
}

// claim finds a frame for line and puts it in the table, busy (remote)
// while a victim's ownership is released. It returns nil, nil when it
// had to wait (the caller looks again).
func (c *Cache) claim(t *Thread, line protocol.PID) (*frame, error) {
	var victim *frame
	for range 2 * len(c.frames) {
		f := &c.frames[c.hand]
		c.hand = (c.hand + 1) % len(c.frames)
		if !f.used {
			victim = f
			break
		}
		if f.busy() || len(f.waiters) > 0 {
			continue
		}
		if f.ref {
			f.ref = false
			continue
		}
		victim = f
		break
	}
	if victim == nil {
		c.wait(t, &c.waiting)
		return nil, nil
	}
	old, memo, dirty := victim.line, victim.memo, victim.dirty
	if victim.used {
		delete(c.table, old)
	}
	*victim = frame{line: line, data: victim.data, used: true, waiters: victim.waiters[:0]}
	c.table[line] = victim
	if memo != selcc.Invalid {
		c.noteMemo(old)
	}
	if memo == selcc.Invalid {
		return victim, nil
	}
	// The old line's memo is gone with it (Invalid before the release
	// lands: the word may grant more than the nodes believe, never less).
	atomic.AddUint64(&c.Stats.Evictions, 1)
	victim.remote = true
	c.mu.Unlock()
	err := c.release(t, old, memo, dirty, victim.data)
	c.mu.Lock()
	victim.remote = false
	c.wakeAll(&victim.waiters)
	c.wakeAll(&c.waiting)
	if err != nil {
		return nil, fmt.Errorf("linecache: evicting %v: %w", old, err)
	}
	return victim, nil
}

// release gives up this node's ownership of line: a dirty Modified line
// is written back, and the release's FAA completes after it landed (§5.2).
func (c *Cache) release(t *Thread, line protocol.PID, memo selcc.Memo, dirty bool, data []byte) error {
	r, off := c.cfg.Memory[line.Dir()], WordOffset(line.Slot())
	me := c.cfg.Self
	if memo == selcc.Modified {
		if dirty && !fire(c.cfg.Mutations.EvictWithoutFlush) {
			c.write(t, r, off+DataOffset, data)
			atomic.AddUint64(&c.Stats.BytesToMemory, LineSize)
		}
		c.faa(t, r, off, selcc.ReleaseExclusive(me))
	} else {
		c.faa(t, r, off, selcc.ReleaseShared(me))
	}
	_, err := c.await(t)
	return err
}

// afterAccess gives the line up when its lease ran out (§5.3.1): its
// local threads kept a remote node waiting for long enough.
func (c *Cache) afterAccess(t *Thread, f *frame) error {
	if !f.contended || f.busy() || f.memo == selcc.Invalid ||
		!selcc.Lease(f.rc, f.wc, c.cfg.Threads, c.cfg.Gamma) {
		return nil
	}
	atomic.AddUint64(&c.Stats.LeaseReleases, 1)
	memo, dirty := f.memo, f.dirty
	f.memo, f.dirty, f.contended, f.rc, f.wc = selcc.Invalid, false, false, 0, 0
	c.noteMemo(f.line)
	f.remote = true
	c.mu.Unlock()
	err := c.release(t, f.line, memo, dirty, f.data)
	c.mu.Lock()
	f.remote = false
	return err
}

func fire(p func() bool) bool { return p != nil && p() }

func (c *Cache) noteMemo(line protocol.PID) {
	if c.cfg.OnMemo != nil {
		c.cfg.OnMemo(line)
	}
}

// The verbs: each is posted, counted, and waited for by await.

func (c *Cache) done(t *Thread) func(uint64, error) {
	return func(_ uint64, err error) {
		if err != nil && t.err == nil {
			t.err = err
		}
		t.pending--
		if t.pending == 0 && t.parked {
			t.parked = false
			t.P.Wake()
		}
	}
}

func (c *Cache) read(t *Thread, dst []byte, r transport.Region, off uint64) {
	t.pending++
	atomic.AddUint64(&c.Stats.Reads, 1)
	d := c.done(t)
	c.cfg.Post.Read(dst, r, off, func(err error) { d(0, err) })
}

func (c *Cache) write(t *Thread, r transport.Region, off uint64, src []byte) {
	t.pending++
	atomic.AddUint64(&c.Stats.Writes, 1)
	d := c.done(t)
	c.cfg.Post.Write(r, off, src, func(err error) { d(0, err) })
}

// atomic posts an atomic whose previous word lands in *prev.
func (c *Cache) atomicDone(t *Thread, prev *uint64) func(uint64, error) {
	t.pending++
	atomic.AddUint64(&c.Stats.Atomics, 1)
	d := c.done(t)
	return func(p uint64, err error) {
		*prev = p
		d(p, err)
	}
}

func (c *Cache) faa(t *Thread, r transport.Region, off, delta uint64) *uint64 {
	var prev = new(uint64)
	c.cfg.Post.FetchAndAdd(r, off, delta, c.atomicDone(t, prev))
	return prev
}

func (c *Cache) cas(t *Thread, r transport.Region, off, expect, install uint64) *uint64 {
	prev := new(uint64)
	c.cfg.Post.CompareAndSwap(r, off, expect, install, c.atomicDone(t, prev))
	return prev
}

// await waits until every verb t posted completed, and returns the first
// error among them.
func (c *Cache) await(t *Thread) (struct{}, error) {
	for t.pending > 0 {
		t.parked = true
		t.P.Park()
	}
	err := t.err
	t.err = nil
	if err != nil {
		err = fmt.Errorf("linecache: node %d: %w", c.cfg.Self, err)
	}
	return struct{}{}, err
}

// Landed tells the cache that a WRITE landed at off of its reply region:
// the sender waiting on that slot looks at it again.
func (c *Cache) Landed(off uint64) {
	slot := int(off / SlotSize)
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot < len(c.polling) && c.polling[slot] != nil {
		c.polling[slot].P.Wake()
		c.polling[slot] = nil
	}
}

// status reads this node's reply slot status word of replier.
func (c *Cache) status(slot int, replier selcc.Node) uint64 {
	off := statusOffset(slot, replier)
	return (*atomic.Uint64)(unsafe.Pointer(&c.cfg.ReplyMem[off])).Load()
}
