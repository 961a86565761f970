package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// Local runs one node in the real world: the node's state machine under one
// lock, worker goroutines that park on channels, storage I/O on a
// background goroutine, timers from the clock. It is the embedded,
// single-node runtime: correct first. Every page is local, so no message
// ever leaves the node; the hot path (a page cached in the right mode) is a
// hash lookup and a latch, under the lock.
type Local struct {
	mu      sync.Mutex
	node    *Node
	store   storage.PageStore
	start   time.Time
	rng     *rand.Rand
	io      []ioRequest
	ioCond  *sync.Cond // the I/O goroutine waits for requests
	idle    *sync.Cond // Flush waits for I/O to drain
	inFlite int
	closed  bool
	done    chan struct{}
	err     error // first violation or storage error
	workers sync.Pool
	// Reads and Writes count storage operations (under the lock).
	Reads, Writes uint64
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
	cfg.SSDPages = store.Slots()
	// Real time: the page provider looks every millisecond, the LRU epoch
	// moves every 10 ms.
	if cfg.ProviderInterval == 0 {
		cfg.ProviderInterval = 1_000_000
	}
	if cfg.EpochInterval == 0 {
		cfg.EpochInterval = 10_000_000
	}
	l := &Local{store: store, start: time.Now(), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), done: make(chan struct{})}
	l.ioCond = sync.NewCond(&l.mu)
	l.idle = sync.NewCond(&l.mu)
	l.node = New(cfg, l, l, make([]byte, cfg.CacheFrames*protocol.PageSize))
	l.workers.New = func() any {
		p := &goParker{l: l, ch: make(chan struct{}, 1)}
		return &bufmgr.Worker{P: p}
	}
	go l.ioLoop()
	l.mu.Lock()
	l.node.Start()
	l.mu.Unlock()
	return l, nil
}

// Node is the node (use it only inside Do).
func (l *Local) Node() *Node { return l.node }

// Do runs fn as a worker of the node, under the node's lock (fn's guards
// park and resume through it).
func (l *Local) Do(fn func(w *bufmgr.Worker) error) error {
	w := l.workers.Get().(*bufmgr.Worker)
	defer l.workers.Put(w)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("actors: node closed")
	}
	if l.err != nil {
		return l.err
	}
	if err := fn(w); err != nil {
		return err
	}
	return l.err
}

type goParker struct {
	l  *Local
	ch chan struct{}
}

func (p *goParker) Park() {
	p.l.mu.Unlock()
	<-p.ch
	p.l.mu.Lock()
}

func (p *goParker) Wake() {
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

// Send implements Env: a node of one never sends.
func (l *Local) Send(m *protocol.Message, payload []byte) {
	l.fail(fmt.Errorf("actors: a local node sent %v", m))
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
	l.io = append(l.io, r)
	l.inFlite++
	l.ioCond.Signal()
}

// ioLoop performs storage operations outside the lock, one at a time, and
// hands their completions back to the node under it.
func (l *Local) ioLoop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.io) == 0 && !l.closed {
			l.ioCond.Wait()
		}
		if len(l.io) == 0 && l.closed {
			close(l.done)
			return
		}
		r := l.io[0]
		l.io = l.io[1:]
		l.mu.Unlock()
		var err error
		if r.write {
			err = l.store.WritePage(r.slot, r.buf)
		} else {
			err = l.store.ReadPage(r.slot, r.buf)
		}
		l.mu.Lock()
		if r.write {
			l.Writes++
		} else {
			l.Reads++
		}
		r.done(err)
		l.inFlite--
		if l.inFlite == 0 {
			l.idle.Broadcast()
		}
	}
}

// Observer, called with l.mu held: in the real world a violation is an
// error the caller sees.

func (l *Local) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

// Violation implements Observer.
func (l *Local) Violation(n protocol.NodeID, err error) { l.fail(err) }

// CopyChanged implements Observer.
func (l *Local) CopyChanged(protocol.NodeID, protocol.PID, protocol.Mode, protocol.Mode, []byte) {}

// Accepted implements Observer.
func (l *Local) Accepted(protocol.NodeID, protocol.Decision) {}

// Obtained implements Observer.
func (l *Local) Obtained(protocol.NodeID, protocol.PID, protocol.Mode, int64) {}

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

// Close flushes and stops the node; the store stays open (its owner closes
// it).
func (l *Local) Close() error {
	err := l.Flush()
	l.mu.Lock()
	l.node.Stop()
	l.closed = true
	l.ioCond.Broadcast()
	l.mu.Unlock()
	<-l.done
	return err
}
