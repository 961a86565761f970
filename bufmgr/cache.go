package bufmgr

import (
	"errors"
	"fmt"
	"slices"

	"github.com/scalestore-go/scalestore/protocol"
)

// Remote is what the cache asks of the node runtime.
type Remote interface {
	// Request starts an ownership request for f.Pending on f.PID. It must not
	// block; completion arrives through the runtime, which wakes the waiters.
	Request(f *Frame)
	// Released is called when a frame's latch became free or an entitled
	// worker had its turn: queued transfers may be served now.
	Released(f *Frame)
	// NeedFrames is called when no frame is free: the page provider should
	// evict.
	NeedFrames()
}

// Parker blocks and resumes one worker. In the simulator, Park yields the
// worker's coroutine to the scheduler and Wake schedules it again.
type Parker interface {
	Park()
	Wake()
	// MaybeYield gives the scheduler a chance to run others at a guard
	// operation (the simulator decides at random); a no-op in the real world.
	MaybeYield()
}

// Worker is one thread of application code using the cache.
type Worker struct {
	ID          int
	P           Parker
	want        protocol.Mode
	entitled    *Frame // the frame whose grant gave this worker a turn
	entitledGen uint64 // ... and which grant
	waiting     *Frame
}

// hasTurn reports whether w holds a still valid entitlement on f.
func (w *Worker) hasTurn(f *Frame) bool { return w.entitled == f && w.entitledGen == f.grantGen }

// Stats counts what the cache did.
type Stats struct {
	Hits, Misses, Restarts uint64
}

// ErrRestart tells the caller to restart its operation: an upgrade found the
// page changed since its shared latch was taken.
var ErrRestart = errors.New("bufmgr: page changed, restart")

// Cache is one node's page cache.
type Cache struct {
	frames      []Frame
	free        []int32
	table       map[protocol.PID]*Frame
	remote      Remote
	freeWaiters []*Worker
	epoch       uint64 // global LRU epoch of this node
	Stats       Stats
	// SkipVersionCheck is the skip-version-check mutation: when it returns
	// true, an optimistic guard reports no change without validating.
	SkipVersionCheck func() bool
	// OnExclusiveRelease, when set, sees every page an exclusive guard
	// releases or downgrades, before others can see it (the simulator
	// records the page's content as the last completed write).
	OnExclusiveRelease func(f *Frame)
}

// NewCache makes a cache of n frames whose page memory is pages (n *
// protocol.PageSize bytes, owned by the caller: the simulator passes a Go
// slice; the real world an off-heap mapping).
func NewCache(n int, pages []byte, remote Remote) *Cache {
	if len(pages) < n*protocol.PageSize {
		panic("bufmgr: page memory smaller than the frames")
	}
	c := &Cache{frames: make([]Frame, n), free: make([]int32, 0, n), table: make(map[protocol.PID]*Frame, n), remote: remote}
	for i := range c.frames {
		f := &c.frames[i]
		f.index = int32(i)
		f.Data = pages[i*protocol.PageSize : (i+1)*protocol.PageSize : (i+1)*protocol.PageSize]
		f.poison()
	}
	for i := n - 1; i >= 0; i-- {
		c.free = append(c.free, int32(i))
	}
	return c
}

// Lookup returns the frame of pid, or nil.
func (c *Cache) Lookup(pid protocol.PID) *Frame { return c.table[pid] }

// Frames is the number of frames.
func (c *Cache) Frames() int { return len(c.frames) }

// Frame returns frame i (for sampling and invariant checks).
func (c *Cache) Frame(i int) *Frame { return &c.frames[i] }

// FreeFrames is the number of frames not in the table.
func (c *Cache) FreeFrames() int { return len(c.free) }

// Epoch is the node's global LRU epoch.
func (c *Cache) Epoch() uint64 { return c.epoch }

// AdvanceEpoch moves the global LRU epoch on (the page provider does it
// periodically).
func (c *Cache) AdvanceEpoch() { c.epoch++ }

// Insert takes a free frame for pid, or returns nil when none is free.
func (c *Cache) Insert(pid protocol.PID) *Frame {
	if len(c.free) == 0 {
		return nil
	}
	i := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	f := &c.frames[i]
	f.PID, f.Mode, f.Pending, f.Evicting, f.Dirty = pid, protocol.ModeNone, protocol.ModeNone, false, false
	f.ReqEpoch = 0
	f.LastUsed, f.Epoch, f.Served, f.AwaitResp, f.AwaitData, f.AwaitAcks = c.epoch, 0, 0, false, false, 0
	f.Queue, f.entitled = f.Queue[:0], 0
	f.grantGen++
	f.inTable = true
	c.table[pid] = f
	return f
}

// Invalidate drops the copy a frame holds: the data is poisoned, the version
// moves on (optimistic readers restart) and, when nobody waits for the page
// and no request is outstanding, the frame goes back to the free list. The
// latch must be free.
func (c *Cache) Invalidate(f *Frame) {
	if !f.Latch.TryLockExclusive() {
		panic("bufmgr: invalidating a latched frame")
	}
	f.poison()
	f.Mode, f.Dirty, f.Served = protocol.ModeNone, false, 0
	f.Latch.UnlockExclusive()
	c.MaybeFree(f)
}

// MaybeFree returns a frame without a copy to the free list when nothing
// refers to it any more.
func (c *Cache) MaybeFree(f *Frame) {
	if !f.inTable || f.Mode != protocol.ModeNone || f.Pending != protocol.ModeNone || len(f.waiters) > 0 || len(f.Queue) > 0 || f.Evicting {
		c.wakeAll(f)
		return
	}
	delete(c.table, f.PID)
	f.inTable = false
	f.entitled = 0
	f.grantGen++
	c.free = append(c.free, f.index)
	c.wakeFreeWaiters()
}

// wakeFreeWaiters wakes every worker waiting for a free frame. All of them,
// not one: a worker resumed for another reason may still sit in the list,
// and waking only that stale entry would lose the wake-up of a real waiter.
func (c *Cache) wakeFreeWaiters() {
	ws := c.freeWaiters
	c.freeWaiters = c.freeWaiters[:0]
	for _, w := range ws {
		w.P.Wake()
	}
}

// Granted is called by the runtime when the outstanding request of f has
// completed: f.Mode holds the new mode. Every waiter whose wish it satisfies
// is entitled to one access before queued transfers are served.
func (c *Cache) Granted(f *Frame) {
	f.grantGen++
	f.entitled = 0
	for _, w := range f.waiters {
		if w.want <= f.Mode && !w.hasTurn(f) {
			w.entitled, w.entitledGen = f, f.grantGen
			f.entitled++
		}
	}
	c.wakeAll(f)
}

// Changed wakes every worker waiting on f so it looks again.
func (c *Cache) Changed(f *Frame) { c.wakeAll(f) }

func (c *Cache) wakeAll(f *Frame) {
	ws := f.waiters
	f.waiters = f.waiters[:0]
	for _, w := range ws {
		w.waiting = nil
		w.P.Wake()
	}
}

// DropEntitlements is called when the frame gave the page up: entitlements
// lapse.
func (c *Cache) DropEntitlements(f *Frame) {
	f.grantGen++
	f.entitled = 0
}

// usable reports whether w may latch f for mode now.
func usable(f *Frame, w *Worker, mode protocol.Mode) bool {
	if f.Mode < mode || f.Evicting {
		return false
	}
	return len(f.Queue) == 0 || w.hasTurn(f)
}

type latchKind uint8

const (
	latchOptimistic latchKind = iota
	latchShared
	latchExclusive
)

// acquire brings pid into the cache in mode and latches it.
func (c *Cache) acquire(w *Worker, pid protocol.PID, mode protocol.Mode, kind latchKind) (*Frame, uint64) {
	w.P.MaybeYield()
	missed := false
	for {
		f := c.table[pid]
		if f == nil {
			f = c.Insert(pid)
			if f == nil {
				c.freeWaiters = append(c.freeWaiters, w)
				c.remote.NeedFrames()
				w.P.Park()
				continue
			}
		}
		if usable(f, w, mode) {
			var v uint64
			ok := false
			switch kind {
			case latchExclusive:
				ok = f.Latch.TryLockExclusive()
			case latchShared:
				ok = f.Latch.TryLockShared()
			default:
				v, ok = f.Latch.Optimistic()
			}
			if ok {
				if w.hasTurn(f) {
					w.entitled = nil
					f.entitled--
					if kind == latchOptimistic {
						c.remote.Released(f)
					}
				}
				if f.LastUsed < c.epoch {
					f.LastUsed = c.epoch
				}
				if missed {
					c.Stats.Misses++
				} else {
					c.Stats.Hits++
				}
				return f, v
			}
		} else if f.Pending == protocol.ModeNone && f.Mode < mode && !f.Evicting && !queueGivesUp(f) {
			missed = true
			f.Pending = mode
			c.remote.Request(f)
			continue // the request may have completed at once (a local grant)
		} else if f.Pending != protocol.ModeNone {
			missed = true
		}
		w.want = mode
		w.waiting = f
		f.waiters = append(f.waiters, w)
		w.P.Park()
	}
}

func queueGivesUp(f *Frame) bool {
	for i := range f.Queue {
		if f.Queue[i].GivesUp() {
			return true
		}
	}
	return false
}

// release is called after a latch was released.
func (c *Cache) release(f *Frame) {
	if f.Latch.Free() {
		c.remote.Released(f)
	}
	c.wakeAll(f)
}

// Candidates samples n frames at the indexes rnd draws (paper §4.2: a
// randomized walk instead of a global LRU list), sorts their LRU stamps and
// appends to dst the evictable ones whose stamp is at or below the given
// percentile of the sample.
func (c *Cache) Candidates(dst []*Frame, n int, percentile int, rnd func() uint64) []*Frame {
	if len(c.frames) == 0 {
		return dst
	}
	var stamps [64]uint64
	var picked [64]*Frame
	if n > len(stamps) {
		n = len(stamps)
	}
	m := 0
	for range n {
		f := &c.frames[rnd()%uint64(len(c.frames))]
		if !Evictable(f) || slices.Contains(picked[:m], f) {
			continue
		}
		stamps[m], picked[m] = f.LastUsed, f
		m++
	}
	if m == 0 {
		return dst
	}
	sorted := stamps[:m]
	slices.Sort(sorted)
	threshold := sorted[(m-1)*percentile/100]
	for _, f := range picked[:m] {
		if f.LastUsed <= threshold {
			dst = append(dst, f)
		}
	}
	return dst
}

// Evictable reports whether the page provider may try to evict f now.
func Evictable(f *Frame) bool {
	return f.inTable && f.Mode != protocol.ModeNone && f.Pending == protocol.ModeNone && !f.Evicting &&
		f.Latch.Free() && len(f.Queue) == 0 && len(f.waiters) == 0 && f.entitled == 0
}

// Take removes a free frame from the free list without binding it to a PID
// (page allocation reserves a frame before it knows the PID); nil if none.
func (c *Cache) Take() *Frame {
	if len(c.free) == 0 {
		return nil
	}
	i := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	return &c.frames[i]
}

// Bind puts a frame obtained with Take into the table as pid, holding mode.
func (c *Cache) Bind(f *Frame, pid protocol.PID) {
	c.free = append(c.free, f.index)
	g := c.Insert(pid)
	if g != f {
		panic("bufmgr: Bind did not get the taken frame back")
	}
}

// Untake returns a frame obtained with Take.
func (c *Cache) Untake(f *Frame) {
	c.free = append(c.free, f.index)
	c.wakeFreeWaiters()
}

// WaitFrame parks w until a frame may be free.
func (c *Cache) WaitFrame(w *Worker) {
	c.freeWaiters = append(c.freeWaiters, w)
	c.remote.NeedFrames()
	w.P.Park()
}

// Describe summarises the cache for stuck-state reports: the free frames,
// the workers waiting for one, and every frame in use.
func (c *Cache) Describe() string {
	s := fmt.Sprintf("free=%d freeWaiters=%d", len(c.free), len(c.freeWaiters))
	for i := range c.frames {
		f := &c.frames[i]
		if !f.inTable {
			continue
		}
		s += fmt.Sprintf(" [%v %v pend=%v ev=%v waiters=%d ent=%d q=%d latch=%d]", f.PID, f.Mode, f.Pending, f.Evicting,
			len(f.waiters), f.entitled, len(f.Queue), f.Latch.state.Load())
	}
	return s
}
