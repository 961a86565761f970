package sim

import (
	"fmt"
	"sync"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Net runs a World on a goroutine of its own and gives every node a
// transport.Transport over it, for code written against real transports
// with real goroutines: the conformance suite (transporttest) runs on it as
// on shm, tcp and ibverbs. Frames are carried as bytes (the transport
// contract, not protocol.Decode's), on the world's links, with its latency
// model and FIFO order; verbs are the world's.
//
// It is a harness, never part of a simulation: it starts a goroutine and
// its runs are not reproducible (goroutines race to issue). Handlers run on
// that goroutine, one at a time; a handler must not call the Net back.
type Net struct {
	mu       sync.Mutex
	w        *World
	handlers []transport.Handler
	closed   []bool
	open     int
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// NewNet makes a world of len(handlers) nodes with no faults and starts
// running it.
func NewNet(seed uint64, handlers []transport.Handler) *Net {
	n := &Net{w: New(seed, len(handlers), DefaultLatency, FaultPlan{Name: "none"}), handlers: handlers,
		closed: make([]bool, len(handlers)), open: len(handlers),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.loop()
	return n
}

// loop steps the world whenever something was scheduled, until the last
// node closes.
func (n *Net) loop() {
	defer close(n.done)
	for {
		n.mu.Lock()
		for n.w.Step() {
		}
		n.mu.Unlock()
		select {
		case <-n.kick:
		case <-n.stop:
			return
		}
	}
}

func (n *Net) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Node is node id's transport.
func (n *Net) Node(id protocol.NodeID) transport.Transport { return &netNode{n: n, id: id} }

type netNode struct {
	n  *Net
	id protocol.NodeID
}

func (t *netNode) Self() protocol.NodeID { return t.id }

func (t *netNode) Send(to protocol.NodeID, frame, payload []byte) error {
	n := t.n
	if len(frame) != protocol.FrameSize || len(payload) > transport.MaxPayload {
		return fmt.Errorf("sim: node %d: frame of %d bytes, payload of %d: %w", t.id, len(frame), len(payload), transport.ErrFrameSize)
	}
	if to == t.id || int(to) >= len(n.handlers) {
		return fmt.Errorf("sim: node %d sending to node %d: %w", t.id, to, transport.ErrUnknownPeer)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed[t.id] {
		return fmt.Errorf("sim: node %d: %w", t.id, transport.ErrClosed)
	}
	f := append([]byte(nil), frame...)
	var p []byte
	if len(payload) > 0 {
		p = append([]byte(nil), payload...)
	}
	e := n.w.alloc()
	e.kind, e.node = evFunc, to
	e.fn = func() {
		if !n.closed[to] { // a closed node's messages are dropped
			n.handlers[to](t.id, f, p)
		}
	}
	e.at = n.w.onLink(t.id, to, n.w.latency.Message+n.w.latency.PerKiB*int64(len(p))/1024)
	n.w.push(e)
	n.wake()
	return nil
}

func (t *netNode) Register(mem []byte) (transport.Region, error) {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	if t.n.closed[t.id] {
		return transport.Region{}, fmt.Errorf("sim: node %d: %w", t.id, transport.ErrClosed)
	}
	return t.n.w.Register(t.id, mem), nil
}

// verb issues a verb under the lock and waits for its completion.
func (t *netNode) verb(r transport.Region, issue func(done func(uint64, error))) (uint64, error) {
	n := t.n
	if int(r.Node) >= len(n.handlers) {
		return 0, fmt.Errorf("sim: node %d: a verb to node %d: %w", t.id, r.Node, transport.ErrUnknownPeer)
	}
	type result struct {
		prev uint64
		err  error
	}
	ch := make(chan result, 1)
	n.mu.Lock()
	if n.closed[t.id] {
		n.mu.Unlock()
		return 0, fmt.Errorf("sim: node %d: %w", t.id, transport.ErrClosed)
	}
	issue(func(prev uint64, err error) { ch <- result{prev, err} })
	n.mu.Unlock()
	n.wake()
	res := <-ch
	return res.prev, res.err
}

func (t *netNode) Read(dst []byte, r transport.Region, off uint64) error {
	_, err := t.verb(r, func(done func(uint64, error)) {
		t.n.w.Read(t.id, dst, r, off, func(err error) { done(0, err) })
	})
	return err
}

func (t *netNode) Write(r transport.Region, off uint64, src []byte) error {
	_, err := t.verb(r, func(done func(uint64, error)) {
		t.n.w.Write(t.id, r, off, src, func(err error) { done(0, err) })
	})
	return err
}

func (t *netNode) CompareAndSwap(r transport.Region, off, old, new uint64) (uint64, error) {
	return t.verb(r, func(done func(uint64, error)) { t.n.w.CompareAndSwap(t.id, r, off, old, new, done) })
}

func (t *netNode) FetchAndAdd(r transport.Region, off, delta uint64) (uint64, error) {
	return t.verb(r, func(done func(uint64, error)) { t.n.w.FetchAndAdd(t.id, r, off, delta, done) })
}

// Close stops the node: its sends fail with ErrClosed and its handler is not
// called after Close returns. The last Close stops the Net's goroutine.
func (t *netNode) Close() error {
	n := t.n
	n.mu.Lock()
	if n.closed[t.id] {
		n.mu.Unlock()
		return nil
	}
	n.closed[t.id] = true
	n.open--
	last := n.open == 0
	n.mu.Unlock()
	if last {
		close(n.stop)
		<-n.done
	}
	return nil
}
