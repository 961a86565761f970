package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// Local runs one node in the real world: the node's state machine under one
// lock, worker goroutines that park on channels, storage I/O on a
// background goroutine (asynchronous, many requests in flight, when the
// store offers it), timers from the clock. It is the embedded, single-node
// runtime. Every page is local, so no message ever leaves the node. Workers
// run in parallel: the hot path (a page cached in the right mode) is a
// lock-free table lookup and a latch; only misses, evictions and the
// protocol take the lock.
type Local struct {
	mu    nodeLock
	node  *Node
	store storage.PageStore
	start time.Time
	rng   *rand.Rand
	ioMu  sync.Mutex // guards io, completed and spare; never held while taking mu
	// ringMu serialises the use of async (submitting and reaping); it is
	// never held while taking mu, nor while waiting for completions.
	ringMu sync.Mutex
	// syncMu serialises a synchronous store's requests (syncLoop) with
	// SyncStore.
	syncMu sync.Mutex
	async  AsyncStore    // the store, if it is asynchronous
	io     []ioRequest   // requests for the I/O goroutine
	ioKick chan struct{} // wakes an idle I/O goroutine
	// completed are finished requests the I/O goroutine posted; the next
	// holder of mu runs them (nodeLock).
	completed, spare []ioDone
	spareIO          []ioRequest
	ioErr            atomic.Pointer[error] // a submission error for the I/O goroutine to report
	idle             *sync.Cond            // Flush waits for I/O to drain
	inFlite          int
	closed           bool
	done             chan struct{}
	err              error       // first violation or storage error (under mu)
	failed           atomic.Bool // err is set (read without the lock)
	stopped          atomic.Bool // closed (read without the lock)
	workers          sync.Pool
	nextID           atomic.Int64
	ioQueued         atomic.Int64           // requests in l.io (read without the lock)
	parked           map[*goParker]struct{} // workers waiting (under mu)
	stopping         bool                   // Stop is under way (under mu)
	out              *outbox                // messages to other nodes; nil for a node of one
	inFrame          bool                   // under mu: handling a frame the transport's goroutine delivered (ReceiveInline)
	gate             startGate              // the start gate of a cluster without membership (txstart.go)
	log              *slog.Logger
	// Obtained, when set, sees how long every ownership request took (for
	// metrics), under the lock.
	OnObtained func(pid protocol.PID, mode protocol.Mode, waited time.Duration)
	pages      []byte // the frames' memory, off the Go heap
	// poll, when set (SetPoller), consumes incoming messages on the
	// calling goroutine; a parked worker polls for pollSpin before it
	// sleeps, and every operation polls once as it starts.
	poll func() int
	// naps, when set, lets the transport's readers nap while workers
	// poll (SetReaderNaps): activity counts the operations started.
	naps      ReaderNaps
	activity  atomic.Uint64
	pollSpin  time.Duration
	pollEvery time.Duration // SetPoller
	pollBase  time.Time     // the clock's origin for nextPoll
	nextPoll  atomic.Int64  // nanoseconds after pollBase: the next operation to start polls
	// trace, when set (EnableTrace), times the hops of remote fetches.
	trace *remoteTrace
	// Reads and Writes count storage operations (under the lock).
	Reads, Writes uint64
	// BadFrames counts frames from peers that were dropped.
	BadFrames atomic.Uint64
	// Flushes counts the device flushes of write-throughs (FlushWriteThroughs).
	Flushes atomic.Uint64
	// vs is the membership view (view.go), under mu; views is set once
	// the node takes part in views (EnableViews), lease is its lease.
	vs    viewState
	views atomic.Bool
	lease atomic.Pointer[func() time.Time]
	// StaleFrames counts frames of an older view that were dropped;
	// DroppedSends messages the transport could not take (a peer down,
	// with views).
	StaleFrames, DroppedSends atomic.Uint64
	dropLogged                atomic.Bool
	// retry are messages the transport refused, to members of the view,
	// offered again every retryEvery (under mu); retryTo their peers.
	retry      []outMsg
	retryTo    protocol.NodeSet
	retryArmed bool
	// partitioned: every frame in or out is refused (Partition).
	partitioned atomic.Bool
	// rep: replicated directories (EnableReplicas), nil without.
	rep *replicas
}

type ioRequest struct {
	write bool
	slot  uint64
	buf   []byte
	done  func(error)
}

// NewLocal starts a node of one over store. cfg.ID must be 0.
func NewLocal(cfg Config, store storage.PageStore) (*Local, error) {
	if cfg.ID != 0 {
		return nil, fmt.Errorf("actors: a local node is node 0, not %d", cfg.ID)
	}
	if cfg.FreeTarget == 0 {
		// A frame in a hundred free (at least 256, at most a tenth of the
		// cache), not a tenth as for a cluster node: every page is local,
		// so a clean frame is free the moment it is evicted and a dirty
		// one after one write, and a worker that finds none free calls the
		// provider at once. At 50K misses a second, 655 free frames of a
		// 256 MiB cache last 13 ms, 13 provider ticks; the 5,900 frames
		// this frees hold data instead (+2% hits out of memory).
		cfg.FreeTarget = max(1, min(cfg.CacheFrames/10, max(256, cfg.CacheFrames/100)))
	}
	cfg.UnallocatedUnreadable = true
	return newLocal(cfg, store)
}

func newLocal(cfg Config, store storage.PageStore) (*Local, error) {
	cfg.SSDPages = store.Slots()
	cfg.NoProgressCheck = true
	if cfg.EvictRounds == 0 {
		// A tick a millisecond and 4 victims a sample: up to 256 samples
		// let the provider keep up with about a million misses a second.
		cfg.EvictRounds = 256
	}
	// Real time: the page provider looks every millisecond, the LRU epoch
	// moves every 10 ms.
	if cfg.ProviderInterval == 0 {
		cfg.ProviderInterval = 1_000_000
	}
	if cfg.EpochInterval == 0 {
		cfg.EpochInterval = 10_000_000
	}
	l := &Local{store: store, start: time.Now(), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), done: make(chan struct{}),
		parked: map[*goParker]struct{}{}, log: discardLogger()}
	l.ioKick = make(chan struct{}, 1)
	l.mu.drain = l.runCompleted
	l.async, _ = store.(AsyncStore)
	l.idle = sync.NewCond(&l.mu)
	pages, err := mapPages(cfg.CacheFrames)
	if err != nil {
		return nil, err
	}
	l.pages = pages
	cfg.AdviseMemory = AdviseHuge
	l.node = New(cfg, l, l, pages)
	l.node.Cache().SetLocker(&l.mu)
	l.node.Cache().PoisonEnds = 64
	l.workers.New = func() any {
		p := &goParker{l: l, ch: make(chan struct{}, 1)}
		return &bufmgr.Worker{ID: int(l.nextID.Add(1)), P: p}
	}
	go l.ioLoop()
	l.mu.Lock()
	l.node.Start()
	l.mu.Unlock()
	return l, nil
}

// Node is the node (use it only inside Do).
func (l *Local) Node() *Node { return l.node }

// Do runs fn as a worker of the node. fn runs without the node's lock: its
// guards take it on the slow path; anything else of the node it touches
// goes through Locked.
func (l *Local) Do(fn func(w *bufmgr.Worker) error) error {
	w := l.workers.Get().(*bufmgr.Worker)
	err := l.DoAs(w, fn)
	l.workers.Put(w)
	return err
}

// Worker is a worker for one goroutine to keep across calls of DoAs (a
// session): Do takes one from a pool and returns it on every call, which
// costs about 15 ns of a lookup that hits in memory. Give it back with
// PutWorker.
func (l *Local) Worker() *bufmgr.Worker { return l.workers.Get().(*bufmgr.Worker) }

// PutWorker takes back a worker from Worker that no call uses any more.
func (l *Local) PutWorker(w *bufmgr.Worker) { l.workers.Put(w) }

// DoAs is Do with the caller's worker, from Worker. A worker runs one call
// at a time.
func (l *Local) DoAs(w *bufmgr.Worker, fn func(w *bufmgr.Worker) error) error {
	if l.stopped.Load() {
		return errors.New("actors: node closed")
	}
	if l.failed.Load() {
		return l.firstErr()
	}
	if err := l.leaseValid(); err != nil {
		return err
	}
	if l.poll != nil && l.pollDue() {
		l.poll() // serve what peers sent: nobody else may be on a CPU to
	}
	if l.naps != nil {
		l.activity.Add(1)
	}
	if p, ok := w.P.(*goParker); ok {
		// The clock is read at the first park, not here: an operation
		// that never parks (a cache hit) must not pay for it.
		p.since = time.Time{}
	}
	if err := l.run(fn, w); err != nil {
		return err
	}
	if l.failed.Load() {
		return l.firstErr()
	}
	// What the operation read was coherent if the lease still holds now:
	// the others change the view only after it expired.
	return l.leaseValid()
}

// run calls fn, turning the unwinding of a failed node's worker into the
// node's error, and that of a guard on an unreadable page into the
// operation's (bufmgr.PageError).
func (l *Local) run(fn func(w *bufmgr.Worker) error, w *bufmgr.Worker) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case errAborted:
				err = l.firstErr()
			case *bufmgr.PageError:
				err = r
			default:
				panic(r)
			}
		}
	}()
	return fn(w)
}

func (l *Local) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

type goParker struct {
	l  *Local
	ch chan struct{}
	// since is when the worker first parked in its current operation
	// (Do): a worker woken by unrelated events parks again and again for
	// one stuck request, so the time of the last park would hide it from
	// the watchdog.
	since time.Time
	// window is how long pollWait polls now (it adapts).
	window time.Duration
	// wokeAt is when Wake was called (traced nodes only).
	wokeAt time.Time
}

// errAborted unwinds a parked worker when the node failed (a peer died, a
// storage error): Do recovers it and returns the node's error.
type errAborted struct{}

// Park waits for Wake with the node's lock released. A worker of a failed
// node does not wait for a reply that will never come: it unwinds.
func (p *goParker) Park() {
	l := p.l
	if l.failed.Load() {
		panic(errAborted{})
	}
	if p.since.IsZero() {
		p.since = time.Now()
	}
	l.parked[p] = struct{}{}
	l.mu.Unlock()
	l.submitQueued() // our own read, usually: no hand-off to the I/O goroutine
	if l.poll != nil {
		p.pollWait()
	} else {
		<-p.ch
	}
	l.mu.Lock()
	if l.trace != nil && !p.wokeAt.IsZero() {
		l.trace.record(l.trace.wake, time.Since(p.wokeAt))
		p.wokeAt = time.Time{}
	}
	delete(l.parked, p)
	if l.failed.Load() {
		panic(errAborted{})
	}
}

// pollWait waits for Wake while consuming incoming messages itself, then
// sleeps: the reply a worker waits for is usually handled by the worker
// itself, with no goroutine to wake on either side of it. How long it polls
// adapts, between minPollSpin and the node's pollSpin: it doubles when the
// wake came within pollSpin, and halves when it came later. Where the node's
// peers are not on a CPU to answer soon (more busy threads than cores),
// polling only takes the CPU from them, and the window shrinks.
func (p *goParker) pollWait() {
	l := p.l
	if p.window == 0 {
		p.window = l.pollSpin
	}
	var start time.Time
	for i := 0; ; i++ {
		select {
		case <-p.ch:
			p.window = min(2*p.window, l.pollSpin)
			return
		default:
		}
		if l.poll() > 0 || (i&31 != 31 && l.pollEvery == 0) {
			continue // a cheap poll (shm) reads the clock every 32nd time
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > p.window {
			break
		}
	}
	if l.naps != nil {
		l.naps.WorkerParks()
		<-p.ch
		l.naps.WorkerRuns()
	} else {
		<-p.ch
	}
	if time.Since(start) <= l.pollSpin {
		// Polling for the longest window would have caught the wake:
		// widen. (Growing only on a wake while polling traps the window
		// below the round trip of a slow transport, TCP, for good.)
		p.window = min(2*p.window, l.pollSpin)
	} else {
		p.window = max(p.window/2, min(minPollSpin, l.pollSpin))
	}
}

// pollDue says whether an operation starting now polls (SetPoller's every).
func (l *Local) pollDue() bool {
	if l.pollEvery <= 0 {
		return true
	}
	now := int64(time.Since(l.pollBase))
	if now < l.nextPoll.Load() {
		return false
	}
	l.nextPoll.Store(now + int64(l.pollEvery))
	return true
}

// ReaderNaps is a transport whose readers can nap while the node's workers
// poll (transport/shm's nap.go): the node tells it how many operations
// its workers started, and when a worker sleeps waiting for the protocol
// (its reply then needs a reader that a producer wakes at once).
type ReaderNaps interface {
	SetActivity(ops *atomic.Uint64)
	WorkerParks()
	WorkerRuns()
}

// SetReaderNaps lets t's readers nap while workers poll. Call it after
// SetPoller, before the first worker runs.
func (l *Local) SetReaderNaps(t ReaderNaps) {
	if l.poll == nil {
		return
	}
	l.naps = t
	t.SetActivity(&l.activity)
}

// minPollSpin is the least a waiting worker polls (SetPoller).
const minPollSpin = time.Microsecond

func (p *goParker) Wake() {
	if p.l.trace != nil {
		p.wokeAt = time.Now() // under the node's lock, as the read in Park
	}
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

func (p *goParker) MaybeYield() {}

// Env, called with l.mu held.

// Now implements Env.
func (l *Local) Now() int64 { return int64(time.Since(l.start)) }

// Rand implements Env.
func (l *Local) Rand() uint64 { return l.rng.Uint64() }

// Send implements Env: the message joins the outbox, which a goroutine
// hands to the transport outside the lock (a full transport queue must not
// stall the node). A node of one never sends.
func (l *Local) Send(m protocol.Message, payload []byte) {
	if l.out == nil {
		l.fail(fmt.Errorf("actors: a node without a transport sent %v", m))
		return
	}
	m.View = l.vs.number
	l.out.add(&m, payload)
}

// ReadPage implements Env.
func (l *Local) ReadPage(slot uint64, buf []byte, done func(error)) {
	l.queueIO(ioRequest{false, slot, buf, done})
}

// WritePage implements Env.
func (l *Local) WritePage(slot uint64, buf []byte, done func(error)) {
	l.queueIO(ioRequest{true, slot, buf, done})
}

// After implements Env.
func (l *Local) After(delay int64, fn func()) {
	time.AfterFunc(time.Duration(delay), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			fn()
		}
	})
}

func (l *Local) queueIO(r ioRequest) {
	l.inFlite++
	l.ioMu.Lock()
	l.io = append(l.io, r)
	l.ioMu.Unlock()
	l.ioQueued.Add(1)
	l.kickIO()
}

// kickIO wakes the I/O goroutine if it is idle.
func (l *Local) kickIO() {
	select {
	case l.ioKick <- struct{}{}:
	default:
	}
}

// runCompleted runs the completions the I/O goroutine posted. Called with
// mu held (by nodeLock, before it releases the lock).
func (l *Local) runCompleted() {
	l.mu.pending.Store(false)
	l.ioMu.Lock()
	done := l.completed
	l.completed, l.spare = l.spare[:0], nil
	l.ioMu.Unlock()
	for i := range done {
		d := &done[i]
		if d.r.write {
			l.Writes++
		} else {
			l.Reads++
		}
		d.r.done(d.err)
		l.inFlite--
		*d = ioDone{}
	}
	l.ioMu.Lock()
	if l.spare == nil {
		l.spare = done[:0]
	}
	l.ioMu.Unlock()
	if l.inFlite == 0 {
		l.idle.Broadcast()
	}
}

// AsyncStore is a store that keeps many requests in flight (storage/nvme's
// io_uring engine). Local uses it when the store has it. Its methods are
// used under Local.ringMu, but for WaitCompletions.
type AsyncStore interface {
	ReadAsync(slot uint64, buf []byte, done func(error)) error
	WriteAsync(slot uint64, buf []byte, done func(error)) error
	// Submit hands queued requests to the device.
	Submit() error
	// Poll reports completions (running their callbacks) until at least
	// min were reported or nothing is in flight.
	Poll(min int) (int, error)
	InFlight() int
	// WaitCompletions blocks until Poll has a completion to report; it runs
	// without ringMu, while workers submit.
	WaitCompletions() error
}

type ioDone struct {
	r   ioRequest
	err error
}

// submitQueued hands queued requests to the asynchronous store unless
// another goroutine is using it (that one, or the I/O goroutine after it,
// submits them). A worker calls it as it parks, outside the node lock, so
// its read reaches the device without waiting for the I/O goroutine to be
// scheduled: that wait was about 180 µs per read with 32 workers.
func (l *Local) submitQueued() {
	if l.async == nil || l.ioQueued.Load() == 0 || !l.ringMu.TryLock() {
		return
	}
	failed := l.submitLocked()
	l.ringMu.Unlock()
	l.kickIO() // the I/O goroutine may be idle: it must reap these
	if failed {
		l.mu.post()
	}
}

// submitLocked submits every queued request; ringMu is held. It reports
// whether some request failed at once (its completion is posted).
func (l *Local) submitLocked() (failed bool) {
	l.ioMu.Lock()
	batch := l.io
	l.io = l.spareIO[:0]
	l.spareIO = nil
	l.ioQueued.Store(0)
	l.ioMu.Unlock()
	for i := range batch {
		r := batch[i]
		cb := func(err error) { l.complete(r, err) }
		var err error
		if r.write {
			err = l.async.WriteAsync(r.slot, r.buf, cb)
		} else {
			err = l.async.ReadAsync(r.slot, r.buf, cb)
		}
		if err != nil {
			l.complete(r, err)
			failed = true
		}
		batch[i] = ioRequest{}
	}
	if len(batch) > 0 {
		if err := l.async.Submit(); err != nil {
			l.ioErr.CompareAndSwap(nil, &err)
		}
	}
	l.ioMu.Lock()
	if l.spareIO == nil {
		l.spareIO = batch[:0]
	}
	l.ioMu.Unlock()
	return failed
}

// complete records a finished request for the node (nodeLock runs it).
func (l *Local) complete(r ioRequest, err error) {
	l.ioMu.Lock()
	l.completed = append(l.completed, ioDone{r, err})
	l.ioMu.Unlock()
}

// ioLoop reaps the asynchronous store's completions (workers submit their
// own requests as they park; it submits what they could not) and posts
// them for the node: nodeLock runs them under the lock. With a synchronous
// store it performs every request itself.
func (l *Local) ioLoop() {
	if l.async == nil {
		l.syncLoop()
		return
	}
	for {
		l.ringMu.Lock()
		failed := l.submitLocked()
		n, err := l.async.Poll(0)
		inflight := l.async.InFlight()
		l.ringMu.Unlock()
		if perr := l.ioErr.Swap(nil); perr != nil && err == nil {
			err = *perr
		}
		if err != nil {
			l.mu.Lock()
			l.fail(fmt.Errorf("actors: storage: %w", err))
			l.mu.Unlock()
		}
		if n > 0 || failed {
			l.mu.post() // only when there is something to run: a post makes the next Unlock drain
		}
		if n > 0 || l.ioQueued.Load() > 0 {
			continue
		}
		if inflight == 0 || err != nil {
			if l.stopped.Load() {
				close(l.done)
				return
			}
			<-l.ioKick
			continue
		}
		// Sleep until a completion, without the ring: workers submit
		// meanwhile. The wait holds this goroutine's P until sysmon takes
		// it back (reserveIOProc in the CLI gives the workers one more).
		if err := l.async.WaitCompletions(); err != nil {
			l.mu.Lock()
			l.fail(fmt.Errorf("actors: storage: %w", err))
			l.mu.Unlock()
		}
	}
}

// syncLoop performs the requests of a synchronous store one by one.
func (l *Local) syncLoop() {
	for {
		l.ioMu.Lock()
		batch := append([]ioRequest(nil), l.io...)
		clear(l.io)
		l.io = l.io[:0]
		l.ioQueued.Store(0)
		l.ioMu.Unlock()
		if len(batch) == 0 {
			if l.stopped.Load() {
				close(l.done)
				return
			}
			<-l.ioKick
			continue
		}
		for _, r := range batch {
			var err error
			l.syncMu.Lock()
			if r.write {
				err = l.store.WritePage(r.slot, r.buf)
			} else {
				err = l.store.ReadPage(r.slot, r.buf)
			}
			l.syncMu.Unlock()
			l.complete(r, err)
		}
		l.mu.post()
	}
}

// Observer, called with l.mu held: in the real world a violation is an
// error the caller sees.

func (l *Local) fail(err error) {
	if l.err == nil {
		l.err = err
		l.failed.Store(true)
		if !l.stopping {
			l.log.Error("node failed", "node", l.node.ID(), "err", err)
		}
		for p := range l.parked {
			p.Wake()
		}
	}
}

// Violation implements Observer.
func (l *Local) Violation(n protocol.NodeID, err error) { l.fail(err) }

// Unreadable implements Observer: the operations on pid fail, the node goes
// on; the log says why once per failed read.
func (l *Local) Unreadable(n protocol.NodeID, pid protocol.PID, err error) {
	if l.log != nil {
		l.log.Warn("page unreadable", "node", n, "page", pid, "err", err)
	}
}

// CopyChanged implements Observer.
func (l *Local) CopyChanged(protocol.NodeID, protocol.PID, protocol.Mode, protocol.Mode, []byte) {}

// Accepted implements Observer.
func (l *Local) Accepted(protocol.NodeID, protocol.Decision) {}

// Obtained implements Observer.
func (l *Local) Obtained(_ protocol.NodeID, pid protocol.PID, mode protocol.Mode, waited int64) {
	if l.OnObtained != nil {
		l.OnObtained(pid, mode, time.Duration(waited))
	}
}

// ErrStoreFull: the node's store has no free slot for a new page.
var ErrStoreFull = errors.New("actors: the node's store is full")

// Allocate creates a page on this node's store and latches it exclusively
// for w (a btree.Session's Allocate).
//
// A store that can reserve disk space for its slots (storage/nvme) is asked
// to first: a full disk then fails this allocation, and the split or insert
// that wanted the page, instead of the flush of pages the store already
// took writes for.
func (l *Local) Allocate(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) {
	var g bufmgr.ExclusiveGuard
	var ok bool
	var err error
	l.Locked(func() {
		if r, can := l.store.(spaceReserver); can {
			if err = r.Reserve(l.node.Directory().Allocated()); err != nil {
				return
			}
		}
		g, ok = l.node.Allocate(w, l.node.ID())
	})
	switch {
	case err != nil && !errors.Is(err, storage.ErrOutOfRange):
		return g, fmt.Errorf("node %d: %w: %w", l.node.ID(), ErrStoreFull, err)
	case !ok:
		return g, fmt.Errorf("node %d: %w", l.node.ID(), ErrStoreFull)
	}
	return g, nil
}

// AllocateOn creates a page on node dir's store (this node's: Allocate)
// and latches it exclusively for w: a B-tree's inner pages live on its
// table's home node, so that the death of another node leaves the tree
// searchable (docs/durability.md).
func (l *Local) AllocateOn(w *bufmgr.Worker, dir protocol.NodeID) (bufmgr.ExclusiveGuard, error) {
	if dir == l.node.ID() {
		return l.Allocate(w)
	}
	var g bufmgr.ExclusiveGuard
	var ok bool
	var err error
	l.Locked(func() { g, ok, err = l.node.AllocateOn(w, dir) })
	switch {
	case err != nil:
		return g, fmt.Errorf("node %d: allocating on node %d: %w", l.node.ID(), dir, err)
	case !ok:
		return g, fmt.Errorf("node %d: allocating on node %d: %w", l.node.ID(), dir, ErrStoreFull)
	}
	return g, nil
}

// spaceReserver is a store that can set disk space aside for its slots
// before they are written (storage/nvme's Reserve).
type spaceReserver interface {
	Reserve(slot uint64) error
}

// FlushWriteThroughs makes the node's write-throughs (Persist, and the
// ones its directory takes for peers) wait for the device's write cache to
// be flushed before they are acknowledged: durability against power loss.
// Concurrent write-throughs share one flush (a group commit): a flusher
// goroutine takes every acknowledgement waiting, flushes once (the store's
// DataSync, fdatasync), and sends them. A store without DataSync needs no
// flush (in memory).
func (l *Local) FlushWriteThroughs() {
	ds, ok := l.store.(interface{ DataSync() error })
	if !ok {
		return
	}
	kick := make(chan struct{}, 1)
	var waiting []func()
	l.Locked(func() {
		l.node.SetFlush(func(fn func()) {
			waiting = append(waiting, fn) // under l.mu, as every completion
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	})
	go func() {
		for {
			select {
			case <-kick:
			case <-l.done:
				return
			}
			l.mu.Lock()
			batch := waiting
			waiting = nil
			l.mu.Unlock()
			if len(batch) == 0 {
				continue
			}
			err := ds.DataSync()
			if err == nil {
				// The backups' copies too (docs/replication.md): a
				// write-through acknowledged here may have been written to
				// a store of another directory's pages.
				err = l.syncReplicaStores()
			}
			l.mu.Lock()
			if err != nil {
				l.fail(fmt.Errorf("actors: node %d: flushing the store for %d write-throughs: %w", l.node.ID(), len(batch), err))
			} else {
				l.Flushes.Add(1)
				for _, fn := range batch {
					fn()
				}
			}
			l.mu.Unlock()
		}
	}()
}

// ErrWriteThrough: a write-through did not complete (the page's copy was
// taken away first); the write may or may not be on its directory's store.
var ErrWriteThrough = errors.New("actors: write-through not acknowledged")

// Persist writes the page g latches exclusively for w through to its
// directory's store and waits until it is there (Node.Persist on the real
// runtime): a write that survives the death of any node's process. A
// peer that is down fails the node, and w unwinds with its error.
// It has the shape of btree.Session.Persist.
func (l *Local) Persist(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error {
	f := g.Frame()
	var ok bool
	l.Locked(func() { ok = l.node.Persist(w, f, nil) })
	if !ok {
		return fmt.Errorf("node %d: %v: %w", l.node.ID(), f.PID, ErrWriteThrough)
	}
	return nil
}

// PersistAll writes the pages gs latch exclusively for w through together,
// in their order, and waits for all (a B-tree split's pages; it has the
// shape of btree.Session.PersistAll). Pages of one directory go to it at
// once, and reach its store in this order: with a write log (storage/nvme)
// in one log write, of which a crash keeps a prefix. Pages of different
// directories have no order between them, so they are written one by one.
func (l *Local) PersistAll(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error {
	fs := make([]*bufmgr.Frame, len(gs))
	for i, g := range gs {
		fs[i] = g.Frame()
		if fs[i].PID.Dir() != fs[0].PID.Dir() {
			for _, g := range gs {
				if err := l.Persist(w, g); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var ok bool
	l.Locked(func() { ok = l.node.PersistAll(w, fs) })
	if !ok {
		return fmt.Errorf("node %d: writing %d pages through (%v first): %w", l.node.ID(), len(fs), fs[0].PID, ErrWriteThrough)
	}
	return nil
}

// SyncStore calls the store's Sync (where it has one: storage/nvme's waits
// for the requests in flight, flushes the device and persists the
// superblock with the metadata set last) while the node runs, in turn with
// the I/O goroutine's use of the store. Completions it reports run at the
// node's next unlock, as any other.
func (l *Local) SyncStore() error {
	s, ok := l.store.(interface{ Sync() error })
	if !ok {
		return nil
	}
	mu := &l.syncMu
	if l.async != nil {
		mu = &l.ringMu
	}
	mu.Lock()
	err := s.Sync()
	mu.Unlock()
	l.mu.post()
	return err
}

// ProtectStale asks a store with an undo journal (storage/nvme's Protect)
// to journal, ahead of the writes and many at a time, the on-disk images of
// the pages whose SSD copy is stale: the ones WriteBack is about to write.
// Pages that turn stale meanwhile are journaled by their write, as usual.
func (l *Local) ProtectStale() error { return l.protectStale(0) }

// protectStale is ProtectStale, batch slots at a time with the store's
// other I/O let in between (0: all at once).
func (l *Local) protectStale(batch int) error {
	p, ok := l.store.(interface{ Protect(slots []uint64) error })
	if !ok {
		return nil
	}
	var slots []uint64
	l.Locked(func() {
		d := l.node.Directory()
		for slot := range d.Allocated() {
			if m := d.Meta(protocol.MakePID(d.Self(), slot)); m != nil && m.Stale {
				slots = append(slots, slot)
			}
		}
	})
	if batch <= 0 {
		batch = max(len(slots), 1)
	}
	mu := &l.syncMu
	if l.async != nil {
		mu = &l.ringMu
	}
	for len(slots) > 0 {
		n := min(batch, len(slots))
		mu.Lock()
		err := p.Protect(slots[:n])
		mu.Unlock()
		if err != nil {
			return err
		}
		slots = slots[n:]
	}
	return nil
}

// prepareBatch is how many old images PrepareCheckpoint journals at a
// time: 256 random reads, a few milliseconds of the device, are the
// longest a miss's read waits behind it.
const prepareBatch = 256

// prepareFrames is how many frames PrepareCheckpoint looks at, and writes
// back the stale ones of, before it lets writers have the node's lock;
// paced, it then rests prepareRest times as long as their writes took (at
// most prepareRestMax). Why: a page being written back is shared, and a
// writer that wants it waits for its write, on a RESP event loop with
// every connection of the loop; back to back, the batches kept one busy
// loop turn waiting on one batch after another (the longest request of a
// load of fresh keys: 109-203 ms), and with the rests no turn meets more
// than one batch (10.6-11.2 ms, as redis-server's with everysec).
const (
	prepareFrames  = 256
	prepareRest    = 2
	prepareRestMax = 50 * time.Millisecond
)

// PrepareCheckpoint does, while writers go on, what would otherwise keep
// them out for most of a checkpoint: it journals the old images of the
// pages whose SSD copy is stale (ProtectStale, prepareBatch at a time) and
// writes those pages back once (one CleanStale round; pages latched or in
// transition are left to the checkpoint). Both are safe beside writers:
// the journal keeps a slot's first image of the epoch, whoever saves it,
// and a page written back here is written again by the checkpoint if it
// changes meanwhile. The checkpoint that follows, writers kept out, then
// journals and writes only the pages changed since.
//
// paced spreads the writes out (prepareRest): for a checkpoint that runs
// beside the writers rather than in one of them, which would wait the
// rests out.
func (l *Local) PrepareCheckpoint(paced bool) error {
	if err := l.protectStale(prepareBatch); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for next := 0; next < l.node.Cache().Frames(); {
		// A batch of frames at a time, its writes done before the next:
		// writers that need the node's lock (a page cleaned here is
		// shared, and its next write takes the slow path) get it between.
		began := time.Now()
		for l.inFlite > 0 {
			l.idle.Wait()
		}
		if l.err != nil {
			return l.err
		}
		if paced && next > 0 {
			l.mu.Unlock()
			time.Sleep(min(prepareRest*time.Since(began), prepareRestMax))
			l.mu.Lock()
		}
		_, next = l.node.CleanStaleFrames(next, prepareFrames)
	}
	for l.inFlite > 0 {
		l.idle.Wait()
	}
	return l.err
}

// SetPoller makes workers consume incoming messages themselves (poll, the
// transport's Poll): every operation polls once as it starts, and a worker
// that waits for the protocol polls for up to spin before it sleeps. Call it
// before the first worker runs; poll must not need the node's lock held.
//
// every spaces the polls at operation start (0: every operation polls)
// where a poll is dear: over TCP it is a system call (about 1.6 us on this
// machine's VM) on an operation that hits in memory in about 1 us, so a
// poll per operation would halve the node's own throughput, while a peer's
// request waits at most every before some worker serves it.
func (l *Local) SetPoller(poll func() int, spin, every time.Duration) {
	l.poll, l.pollSpin, l.pollEvery = poll, spin, every
	l.pollBase = time.Now()
	if t := l.trace; t != nil {
		l.poll = func() int {
			n := poll()
			t.polled.Add(uint64(n))
			return n
		}
	}
}

// Locked runs fn under the node's lock (for statistics).
func (l *Local) Locked(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

// Flush writes every dirty page back and empties the cache.
func (l *Local) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for round := 0; ; round++ {
		for l.inFlite > 0 {
			l.idle.Wait()
		}
		c := l.node.Cache()
		if c.FreeFrames() == c.Frames() || l.err != nil {
			return l.err
		}
		if round > 100 {
			return fmt.Errorf("actors: flush did not empty the cache (%d frames in use)", c.Frames()-c.FreeFrames())
		}
		l.node.EvictAll()
	}
}

// Leave hands back every page the node holds, for a node that leaves the
// cluster (paper §6.6): each is evicted to its directory, which pulls the
// dirty ones, until no frame is in use. Unlike Flush it lets go of the lock
// between rounds, so that the directories' answers (remote, for a compute
// node) can arrive. No worker may run meanwhile. It returns how many frames
// were in use when it began; an error if the cache is not empty within
// limit.
func (l *Local) Leave(limit time.Duration) (held int, err error) {
	deadline := time.Now().Add(limit)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.node.Cache()
	held = c.Frames() - c.FreeFrames()
	for {
		if l.err != nil {
			return held, l.err
		}
		if c.FreeFrames() == c.Frames() {
			return held, nil
		}
		if time.Now().After(deadline) {
			return held, fmt.Errorf("actors: node %d still holds %d pages %v after it began to leave (%s)",
				l.node.ID(), c.Frames()-c.FreeFrames(), limit, l.node.DescribeHeld(8))
		}
		l.node.EvictAll()
		l.mu.Unlock()
		time.Sleep(50 * time.Microsecond)
		l.mu.Lock()
	}
}

// Names counts the pages of this node's directory whose metadata names
// node as their exclusive owner or a sharer (none may, once node left).
func (l *Local) Names(node protocol.NodeID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.node.Directory()
	n := 0
	for slot := range d.Allocated() {
		if m := d.Meta(protocol.MakePID(d.Self(), slot)); m != nil && m.Holds(node) {
			n++
		}
	}
	return n
}

// WriteBack writes every page whose SSD copy is stale to the store, while
// workers go on (a checkpoint: the caller keeps writers out). Unlike Flush it
// leaves clean pages cached; a written-back page is evicted, and read again
// when next needed.
func (l *Local) WriteBack() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for round := 0; ; round++ {
		for l.inFlite > 0 {
			l.idle.Wait()
		}
		if l.err != nil {
			return l.err
		}
		busy := l.node.CleanStale()
		if l.inFlite > 0 {
			continue
		}
		if busy == 0 {
			return nil
		}
		if round > 100_000 {
			return fmt.Errorf("actors: write-back did not finish (%d changed pages stay latched)", busy)
		}
		// Latched by workers: let them finish.
		l.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		l.mu.Lock()
	}
}

// halt lets the timers lapse and stops the I/O goroutine and the outbox,
// which first sends what is queued if deliver (a clean close), else drops
// it (a stop or a kill: see outbox.close). Called with l.mu held; returns
// with it released.
func (l *Local) halt(deliver bool) {
	l.node.Stop()
	l.closed = true
	l.stopped.Store(true)
	l.kickIO()
	l.mu.Unlock()
	<-l.done
	l.stopReplicaStores()
	if l.out != nil {
		if n := l.out.close(deliver); n > 0 {
			l.log.Warn("stopped with messages not sent", "node", l.node.ID(), "dropped", n)
		}
	}
}

// Abandon stops the node without writing anything back, as a killed
// process would leave its store (tests of recovery use it). In-flight I/O
// completes.
func (l *Local) Abandon() {
	l.mu.Lock()
	for l.inFlite > 0 {
		l.idle.Wait()
	}
	l.halt(false)
	_ = unmapPages(l.pages)
}

// Close flushes and stops the node; the store stays open (its owner closes
// it). The messages it still has to send reach the transport before Close
// returns; one the transport refused is the error.
func (l *Local) Close() error {
	l.stopRereplication()
	err := l.Flush()
	l.mu.Lock()
	l.halt(true)
	l.mu.Lock()
	if err == nil {
		err = l.err // set by a send the transport refused while the outbox emptied
	}
	l.mu.Unlock()
	if uerr := unmapPages(l.pages); err == nil {
		err = uerr
	}
	return err
}
