package bufmgr

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scalestore-go/scalestore/internal/prefetch"
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
	// Unreadable is the error for a guard on pid, whose frame holds an
	// unreadable copy: it wraps ErrUnreadable, and the store's error when
	// the read failed on this node.
	Unreadable(pid protocol.PID) error
	// Reachable is nil when pid's directory may be asked for it; otherwise
	// why not (its node is out of the membership view): the access fails
	// at once with a *PageError instead of waiting for a node that is
	// down. Called on the slow path only, before each request.
	Reachable(pid protocol.PID) error
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
	// satisfied counts the grants that met this worker's wish while it
	// waited in its current access: one is all an access may need (the
	// grant entitles it to a turn); Stats.Regranted counts the accesses
	// that needed more.
	satisfied int
}

// hasTurn reports whether w holds a still valid entitlement on f.
func (w *Worker) hasTurn(f *Frame) bool { return w.entitled == f && w.entitledGen == f.grantGen }

// Stats counts what the cache did.
type Stats struct {
	Hits, Misses, Restarts uint64
	// SlowHits are the hits the slow path served (the page was cached but
	// its hot path was closed).
	SlowHits uint64
	// Regranted counts the accesses that needed a second grant after one
	// that met their wish (a cost invariant: it must stay 0, since a grant
	// entitles every waiter it satisfies to one access).
	Regranted uint64
}

// ErrUnreadable is wrapped by the error of a guard on a page whose SSD copy
// could not be read (a corrupt page, an I/O error that did not go away).
var ErrUnreadable = errors.New("page unreadable")

// PageError is the error of a guard on an unreadable page: the operation on
// that page fails, the node and its other pages go on. Err wraps
// ErrUnreadable and, where the node knows it, the store's own error.
//
// Exclusive, Shared and Optimistic return no error (the B-tree's hot path
// has no room for one): they panic with a *PageError instead, which the
// runtime's worker loop recovers (Catch) and returns as the operation's
// error. A caller of those must therefore hold no latch when it calls them,
// or the latch would stay held; the guard conversions (Upgrade, ToShared,
// ToExclusive) return the *PageError instead of panicking.
type PageError struct {
	PID protocol.PID
	Err error
}

func (e *PageError) Error() string { return fmt.Sprintf("page %v: %v", e.PID, e.Err) }

// Unwrap returns the cause.
func (e *PageError) Unwrap() error { return e.Err }

// Catch runs fn and returns the *PageError a guard inside it panicked with,
// or nil. Any other panic goes on.
func Catch(fn func()) (err *PageError) {
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*PageError)
			if !ok {
				panic(r)
			}
			err = pe
		}
	}()
	fn()
	return nil
}

// ErrRestart tells the caller to restart its operation: an upgrade found the
// page changed since its shared latch was taken.
var ErrRestart = errors.New("bufmgr: page changed, restart")

// Cache is one node's page cache.
//
// Two paths lead to a page. The hot path (a page cached in a sufficient
// mode, nobody waiting for it, no transfer queued) is a lock-free table
// lookup and a latch: it allocates nothing and writes no shared memory but
// the latch word (and nothing at all for optimistic reads). Everything else
// takes the slow path, which runs under the node runtime's lock (SetLocker;
// the simulator needs none) together with the protocol.
type Cache struct {
	frames   []Frame        // no Go pointers: the collector never scans them
	pageBase unsafe.Pointer // the first frame's page; frame i's is i pages on
	// Per frame (by index), kept out of Frame so that frames hold no Go
	// pointers: the workers parked on the frame and the transfers and
	// invalidations waiting to be served.
	waiters     [][]*Worker
	queues      [][]Transfer
	free        freeList
	table       table
	remote      Remote
	mu          sync.Locker
	freeWaiters []*Worker
	epoch       atomic.Uint64 // global LRU epoch of this node
	hits        [hitStripes]stripe
	restarts    atomic.Uint64
	stats       Stats // the slow path's counts (under the lock)
	// SkipVersionCheck is the skip-version-check mutation: when it returns
	// true, an optimistic guard reports no change without validating.
	SkipVersionCheck func() bool
	// UpgradeIgnoresVersion and EntitleFewer are the mutations of the same
	// names (package mutation); nil: the rule holds.
	UpgradeIgnoresVersion func() bool
	EntitleFewer          func() bool
	// PoisonEnds, when above 0, limits the poison of a dropped frame
	// (Poison) to its first and its last PoisonEnds bytes: a page's header,
	// and both copies of a register's value. By default a dropped frame is
	// poisoned whole, so that a reader who skips validation is caught
	// whatever it reads (the simulator's B-tree and index workloads); the
	// real-world runtime and the simulator's register workloads poison the
	// ends only, since a dropped frame is refilled with the next page
	// anyway, and 4 KiB of stores to a cold frame on every invalidation
	// slowed down every miss.
	PoisonEnds int
	// PoisonHead, when above 0, poisons only the first PoisonHead bytes of
	// a dropped frame (and overrides PoisonEnds): enough where every read
	// checks that a page's two ends agree (the simulator's registers, whose
	// value is at both ends: a poisoned head and a stale tail are a torn
	// read, a violation), at one cold line of stores instead of two.
	PoisonHead int
	// OnExclusiveRelease, when set, sees every page an exclusive guard
	// releases or downgrades, before others can see it (the simulator
	// records the page's content as the last completed write).
	OnExclusiveRelease func(f *Frame)
}

// NewCache makes a cache of n frames whose page memory is pages (n *
// protocol.PageSize bytes, owned by the caller: the simulator passes a Go
// slice; the real world an off-heap mapping). advise, when not nil, sees the
// memory the hot path reads at random (the frame array and the translation
// table) before anything touches it: the real-world runtime asks the kernel
// for huge pages there (a lookup touches a random bucket and a random frame,
// and TLB misses would cost more than the cache misses), which only works
// before the first fault.
func NewCache(n int, pages []byte, remote Remote, advise func(mem []byte)) *Cache {
	if len(pages) < n*protocol.PageSize {
		panic("bufmgr: page memory smaller than the frames")
	}
	c := &Cache{frames: make([]Frame, n), free: newFreeList(n), remote: remote, mu: nopLocker{},
		waiters: make([][]*Worker, n), queues: make([][]Transfer, n)}
	c.table = newTable(c.frames)
	if advise != nil {
		advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.frames))), n*int(unsafe.Sizeof(Frame{}))))
		advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.table.buckets))), len(c.table.buckets)*int(unsafe.Sizeof(bucket{}))))
	}
	c.pageBase = unsafe.Pointer(unsafe.SliceData(pages))
	for i := range c.frames {
		f := &c.frames[i]
		f.index = int32(i)
		c.poison(f)
	}
	for i := n - 1; i >= 0; i-- {
		c.free.push(int32(i))
	}
	return c
}

// Page is f's page memory. It is computed from f's address, not read from
// the frame: on the hot path the frame's cache line and the page's then load
// in parallel instead of one after the other (both usually miss).
func (c *Cache) Page(f *Frame) []byte {
	i := (uintptr(unsafe.Pointer(f)) - uintptr(unsafe.Pointer(unsafe.SliceData(c.frames)))) / unsafe.Sizeof(Frame{})
	return unsafe.Slice((*byte)(unsafe.Add(c.pageBase, i*protocol.PageSize)), protocol.PageSize)
}

// HintHome hints the lines of bytes [off, off+n) of the page that pid's
// home frame would hold, at most 16 lines: a caller that can guess where
// in a page it will read overlaps that miss with the page's others. The
// page may be in another frame or absent (the lines are then another
// page's or a free frame's): a hint only, it reads nothing and changes
// nothing. It hints nothing while most cached pages are away from home
// (the table then looks them up in its buckets first), as in a cache
// much smaller than the store.
func (c *Cache) HintHome(pid protocol.PID, off, n int) {
	if c.pageBase == nil || off < 0 || n <= 0 || off >= protocol.PageSize || atomic.LoadUint32(&c.table.homeFirst) == 0 {
		return
	}
	n = min(n, protocol.PageSize-off)
	first, last := off>>6, (off+n-1)>>6
	p := unsafe.Add(c.pageBase, uintptr(c.table.home(pid))*protocol.PageSize+uintptr(first)<<6)
	prefetch.Lines(p, min(last-first+1, 16))
}

// hitStripes spreads the hot path's hit counters over cache lines so
// threads do not share one.
const hitStripes = 16

type stripe struct {
	n atomic.Uint64
	_ [56]byte
}

type nopLocker struct{}

func (nopLocker) Lock()   {}
func (nopLocker) Unlock() {}

// SetLocker makes the slow path run under mu, the node runtime's lock
// (the real world runs workers in parallel; the simulator runs one at a
// time and needs none). Call it before any worker runs.
func (c *Cache) SetLocker(mu sync.Locker) { c.mu = mu }

// Stats reads the counters (call it under the lock in the real world).
func (c *Cache) Stats() Stats {
	s := c.stats
	s.SlowHits = s.Hits
	for i := range c.hits {
		s.Hits += c.hits[i].n.Load()
	}
	s.Restarts = c.restarts.Load()
	return s
}

// Lookup returns the frame of pid, or nil. Slow path only (under the lock).
func (c *Cache) Lookup(pid protocol.PID) *Frame {
	f := c.table.get(pid)
	if f == nil || !f.inTable {
		return nil
	}
	return f
}

// Frames is the number of frames.
func (c *Cache) Frames() int { return len(c.frames) }

// Frame returns frame i (for sampling and invariant checks).
func (c *Cache) Frame(i int) *Frame { return &c.frames[i] }

// FreeFrames is the number of frames not in the table.
func (c *Cache) FreeFrames() int { return c.free.len() }

// Epoch is the node's global LRU epoch.
func (c *Cache) Epoch() uint64 { return c.epoch.Load() }

// AdvanceEpoch moves the global LRU epoch on (the page provider does it
// periodically).
func (c *Cache) AdvanceEpoch() { c.epoch.Add(1) }

// stamp records an access for the epoch-based LRU: a store only when the
// stamp is behind, so hot pages cause no writes (paper §4.1).
func (c *Cache) stamp(f *Frame) {
	if e := c.epoch.Load(); f.lastUsed.Load() < e {
		storeRelaxed(&f.lastUsed, e)
	}
}

// Insert takes a free frame for pid, or returns nil when none is free.
// It takes pid's home frame when that one is free: the hot path finds a
// page in its home without reading the translation table's bucket.
func (c *Cache) Insert(pid protocol.PID) *Frame {
	i := int32(c.table.home(pid))
	if !c.free.take(i) {
		if i = c.free.pop(); i < 0 {
			return nil
		}
	}
	f := &c.frames[i]
	f.PID, f.Mode, f.Pending, f.Evicting, f.Dirty, f.Unreadable = pid, protocol.ModeNone, protocol.ModeNone, false, false, false
	f.ReqEpoch = 0
	f.Epoch, f.Served, f.AwaitResp, f.AwaitData, f.AwaitAcks = 0, 0, false, false, 0
	f.lastUsed.Store(c.epoch.Load())
	c.queues[f.index], f.entitled = c.queues[f.index][:0], 0
	f.grantGen++
	f.inTable = true
	f.slow()
	c.table.insert(f, pid)
	return f
}

// Invalidate drops the copy a frame holds: the data is poisoned, the version
// moves on (optimistic readers restart) and, when nobody waits for the page
// and no request is outstanding, the frame goes back to the free list. The
// latch must be free.
func (c *Cache) Invalidate(f *Frame) {
	f.slow()
	// A hot-path worker may hold the latch for an instant: it latched
	// before it saw the frame go slow and is backing off now.
	for spins := 0; !f.Latch.TryLockExclusive(); spins++ {
		if spins > 1<<20 {
			panic("bufmgr: invalidating a latched frame")
		}
		runtime.Gosched()
	}
	c.InvalidateLocked(f)
}

// InvalidateLocked is Invalidate for a caller that went slow and took the
// frame's exclusive latch itself (the protocol side, holding it across a
// hand-over so that no worker latches the copy in between); it releases
// the latch.
func (c *Cache) InvalidateLocked(f *Frame) {
	c.poison(f)
	f.Mode, f.Dirty, f.Served, f.Unreadable = protocol.ModeNone, false, 0, false
	f.Latch.UnlockExclusive()
	c.MaybeFree(f)
}

// MaybeFree returns a frame without a copy to the free list when nothing
// refers to it any more.
func (c *Cache) MaybeFree(f *Frame) {
	if !f.inTable || f.Mode != protocol.ModeNone || f.Pending != protocol.ModeNone || len(c.waiters[f.index]) > 0 || len(c.queues[f.index]) > 0 || f.Evicting {
		c.wakeAll(f)
		return
	}
	c.table.remove(f, f.PID)
	f.inTable = false
	f.entitled = 0
	f.grantGen++
	c.free.push(f.index)
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
	c.entitle(f)
}

// entitle gives every waiter on f whose wish f's mode meets a turn, and
// wakes them all.
func (c *Cache) entitle(f *Frame) {
	for _, w := range c.waiters[f.index] {
		if w.want <= f.Mode {
			w.satisfied++
		}
		if w.want <= f.Mode && !w.hasTurn(f) {
			if c.EntitleFewer != nil && w.want == f.Mode && c.EntitleFewer() {
				continue // mutation: the rule is broken on purpose
			}
			w.entitled, w.entitledGen = f, f.grantGen
			f.entitled++
		}
	}
	c.wakeAll(f)
}

// Upgraded is Granted for a request that upgraded a copy f kept all along
// (shared to exclusive): entitlements of the earlier grant still count, since
// the page never left. Workers it entitled may not have run yet (woken, not
// resumed); the hand-over queued behind the upgrade must wait for them too.
func (c *Cache) Upgraded(f *Frame) { c.entitle(f) }

// Changed wakes every worker waiting on f so it looks again.
func (c *Cache) Changed(f *Frame) { c.wakeAll(f) }

func (c *Cache) wakeAll(f *Frame) {
	ws := c.waiters[f.index]
	c.waiters[f.index] = c.waiters[f.index][:0]
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

// Queue is the list of transfers and invalidations waiting to be served
// from f (the node runtime's; under the lock).
func (c *Cache) Queue(f *Frame) *[]Transfer { return &c.queues[f.index] }

// HasWaiters reports whether workers wait on the frame.
func (c *Cache) HasWaiters(f *Frame) bool { return len(c.waiters[f.index]) > 0 }

// usable reports whether w may latch f for mode now.
func (c *Cache) usable(f *Frame, w *Worker, mode protocol.Mode) bool {
	if f.Mode < mode || f.Evicting {
		return false
	}
	return len(c.queues[f.index]) == 0 || w.hasTurn(f)
}

type latchKind uint8

const (
	latchOptimistic latchKind = iota
	latchShared
	latchExclusive
)

// hot tries the hot path: pid cached in a mode that covers mode, nothing
// queued or waiting. It latches (or, optimistically, reads the version)
// without the node lock; ok is false when the slow path must decide.
func (c *Cache) hot(w *Worker, pid protocol.PID, mode protocol.Mode, kind latchKind) (f *Frame, v uint64, ok bool) {
	f = c.table.get(pid)
	if f == nil {
		return nil, 0, false
	}
	key := tableKey(pid)
	switch kind {
	case latchOptimistic:
		if v, ok = f.Latch.Optimistic(); !ok {
			return nil, 0, false
		}
		if protocol.Mode(f.fast.Load()) < mode || f.key.Load() != key {
			return nil, 0, false
		}
	case latchShared:
		if !f.Latch.TryLockShared() {
			return nil, 0, false
		}
		if protocol.Mode(f.fast.Load()) < mode || f.key.Load() != key {
			if f.Latch.UnlockShared() {
				c.lockedRelease(f)
			}
			return nil, 0, false
		}
	default:
		if !f.Latch.TryLockExclusive() {
			return nil, 0, false
		}
		if protocol.Mode(f.fast.Load()) < mode || f.key.Load() != key {
			f.Latch.UnlockExclusiveUnchanged() // nothing was touched
			c.lockedRelease(f)
			return nil, 0, false
		}
	}
	c.stamp(f)
	c.hits[w.ID&(hitStripes-1)].n.Add(1)
	return f, v, true
}

// lockedRelease tells the protocol, under the lock, that f's latch was
// released on the hot path while the frame needs attention.
func (c *Cache) lockedRelease(f *Frame) {
	c.mu.Lock()
	c.release(f)
	c.mu.Unlock()
}

// acquire brings pid into the cache in mode and latches it; a *PageError,
// with nothing latched, when the copy obtained is unreadable.
func (c *Cache) acquire(w *Worker, pid protocol.PID, mode protocol.Mode, kind latchKind) (*Frame, uint64, *PageError) {
	w.P.MaybeYield()
	if f, v, ok := c.hot(w, pid, mode, kind); ok {
		return f, v, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acquireHeld(w, pid, mode, kind)
}

// acquireHeld is the slow path of acquire; the caller holds the lock.
func (c *Cache) acquireHeld(w *Worker, pid protocol.PID, mode protocol.Mode, kind latchKind) (*Frame, uint64, *PageError) {
	missed := false
	w.satisfied = 0
	for {
		f := c.Lookup(pid)
		if f == nil {
			f = c.Insert(pid)
			if f == nil {
				c.freeWaiters = append(c.freeWaiters, w)
				c.remote.NeedFrames()
				w.P.Park()
				continue
			}
		}
		if c.usable(f, w, mode) {
			if f.Unreadable {
				// The copy is here but means nothing: the operation fails,
				// and its turn (if the grant gave it one) passes to
				// whatever is queued, so that a successor still gets the
				// page.
				if w.hasTurn(f) {
					w.entitled = nil
					f.entitled--
					c.remote.Released(f)
				}
				c.stats.Misses++
				return nil, 0, &PageError{PID: pid, Err: c.remote.Unreadable(pid)}
			}
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
				c.stamp(f)
				if w.satisfied > 1 {
					c.stats.Regranted++
				}
				if missed {
					c.stats.Misses++
				} else {
					c.stats.Hits++
				}
				c.maybeFast(f)
				return f, v, nil
			}
		} else if f.Pending == protocol.ModeNone && f.Mode < mode && !f.Evicting && !c.queueGivesUp(f) {
			if err := c.remote.Reachable(pid); err != nil {
				c.stats.Misses++
				c.MaybeFree(f)
				return nil, 0, &PageError{PID: pid, Err: err}
			}
			missed = true
			f.slow()
			f.Pending = mode
			c.remote.Request(f)
			continue // the request may have completed at once (a local grant)
		} else if f.Pending != protocol.ModeNone {
			missed = true
		}
		w.want = mode
		w.waiting = f
		f.slow() // before parking: a hot-path holder's release must come here to wake us
		c.waiters[f.index] = append(c.waiters[f.index], w)
		if c.usable(f, w, mode) && latchable(f, kind) {
			// The holder released on the hot path before it could see the
			// frame go slow; do not park for a wake-up nobody will send.
			c.waiters[f.index] = c.waiters[f.index][:len(c.waiters[f.index])-1]
			w.waiting = nil
			continue
		}
		w.P.Park()
	}
}

// latchable reports whether a latch of kind could be taken now.
func latchable(f *Frame, kind latchKind) bool {
	if kind == latchExclusive {
		return f.Latch.Free()
	}
	return !f.Latch.HeldExclusive()
}

// maybeFast opens the hot path for f when nothing about it needs the
// protocol: no request outstanding, nothing queued, no eviction, nobody
// waiting or owed a turn.
func (c *Cache) maybeFast(f *Frame) {
	if f.Pending == protocol.ModeNone && len(c.queues[f.index]) == 0 && !f.Evicting && len(c.waiters[f.index]) == 0 && f.entitled == 0 && f.inTable && !f.Unreadable {
		f.fast.Store(uint32(f.Mode))
	}
}

func (c *Cache) queueGivesUp(f *Frame) bool {
	for i := range c.queues[f.index] {
		if c.queues[f.index][i].GivesUp() {
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
	// The sampled frames are random, so each is a cache miss (three: the
	// frame, its waiters and its queue); hint them all before looking at
	// any, so that the sample costs about one miss instead of 3n, under
	// the node lock that every miss of the workers needs too.
	var idx [64]uint64
	for i := range n {
		idx[i] = rnd() % uint64(len(c.frames))
		prefetch.Line(unsafe.Pointer(&c.frames[idx[i]]))
		prefetch.Line(unsafe.Pointer(&c.waiters[idx[i]]))
		prefetch.Line(unsafe.Pointer(&c.queues[idx[i]]))
	}
	m := 0
	for _, i := range idx[:n] {
		f := &c.frames[i]
		if !c.Evictable(f) || slices.Contains(picked[:m], f) {
			continue
		}
		stamps[m], picked[m] = f.LastUsed(), f
		m++
	}
	if m == 0 {
		return dst
	}
	sorted := stamps[:m]
	slices.Sort(sorted)
	threshold := sorted[(m-1)*percentile/100]
	for _, f := range picked[:m] {
		if f.LastUsed() <= threshold {
			dst = append(dst, f)
		}
	}
	return dst
}

// Evictable reports whether the page provider may try to evict f now.
func (c *Cache) Evictable(f *Frame) bool {
	return f.inTable && f.Mode != protocol.ModeNone && f.Pending == protocol.ModeNone && !f.Evicting &&
		f.Latch.Free() && len(c.queues[f.index]) == 0 && len(c.waiters[f.index]) == 0 && f.entitled == 0
}

// Claim closes the hot path of f and reports whether the page provider may
// evict it now; if not, the hot path opens again. The hot path is closed
// before the latch is looked at, so a worker that latches concurrently
// either is seen by Evictable or sees the frame go slow and backs off.
func (c *Cache) Claim(f *Frame) bool {
	f.slow()
	if c.Evictable(f) {
		return true
	}
	c.maybeFast(f)
	return false
}

// Take removes a free frame from the free list without binding it to a PID
// (page allocation reserves a frame before it knows the PID); nil if none.
func (c *Cache) Take() *Frame {
	i := c.free.pop()
	if i < 0 {
		return nil
	}
	return &c.frames[i]
}

// Bind puts pid into the table in place of a frame obtained with Take (which
// kept a frame free for it) and returns the frame it got: pid's home frame
// when that is free, else the one taken.
func (c *Cache) Bind(f *Frame, pid protocol.PID) *Frame {
	c.free.push(f.index)
	return c.Insert(pid)
}

// Untake returns a frame obtained with Take.
func (c *Cache) Untake(f *Frame) {
	c.free.push(f.index)
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
	s := fmt.Sprintf("free=%d freeWaiters=%d", c.free.len(), len(c.freeWaiters))
	for i := range c.frames {
		f := &c.frames[i]
		if !f.inTable {
			continue
		}
		s += fmt.Sprintf(" [%v %v pend=%v ev=%v waiters=%d ent=%d q=%d latch=%d]", f.PID, f.Mode, f.Pending, f.Evicting,
			len(c.waiters[f.index]), f.entitled, len(c.queues[f.index]), f.Latch.state.Load())
	}
	return s
}
