//go:build linux

package shm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// One-sided verbs are emulated: a request record travels in the message
// ring (so it is ordered after every earlier Send and verb of this node to
// the peer), the peer's reader serves it against its registered memory, and
// the answer comes back in the peer's response ring, which the waiting
// callers drain themselves. Answers bypass the message ring on purpose: a
// handler that issues a verb to the peer it is handling would otherwise wait
// for its own reader.
//
// Request frame:                      Response frame:
//
//	[0]      op                          [0]      op
//	[4,8)    region key                  [1]      status
//	[8,16)   request id                  [8,16)   request id
//	[16,24)  offset                      [16,24)  previous value (atomics)
//	[24,28)  length (read, write)        payload: the bytes read
//	[32,40)  old (CAS)
//	[40,48)  new (CAS) / delta (FAA)
//	payload: the bytes to write
const (
	opRead  = 1
	opWrite = 2
	opCAS   = 3
	opFAA   = 4
)

// Verb statuses.
const (
	stOK         = 0
	stAccess     = 1 // no such region, wrong key, out of bounds
	stMisaligned = 2
	stBad        = 3 // malformed request or answer
	stFailed     = 4 // local: the link failed before the answer came
)

var opName = [...]string{opRead: "read", opWrite: "write", opCAS: "compare-and-swap", opFAA: "fetch-and-add"}

// Register exposes mem to peers under a fresh random non-zero key. mem must
// stay valid and must not move until the transport is closed.
func (t *Transport) Register(mem []byte) (transport.Region, error) {
	if t.closed.Load() {
		return transport.Region{}, fmt.Errorf("shm: register on node %d: %w", t.self, transport.ErrClosed)
	}
	if len(mem) == 0 {
		return transport.Region{}, errors.New("shm: register: empty region")
	}
	t.regMu.Lock()
	for {
		// Random keys: a peer holding a stale Region of another run, or
		// guessing, is refused rather than served.
		key := rand.Uint32()
		if key == 0 || t.regions[key] != nil {
			continue
		}
		t.regions[key] = mem[:len(mem):len(mem)]
		r := transport.Region{Node: t.self, Key: key, Len: uint64(len(mem))}
		a := t.exportable(mem)
		var e exported
		if a != nil {
			// Memory of AllocMemory: every peer maps it (direct.go).
			e = exported{key: key, fd: a.fd, len: uint64(len(mem))}
			t.exports = append(t.exports, e)
		}
		t.regMu.Unlock()
		if a != nil {
			t.offerLive(e)
		}
		return r, nil
	}
}

// Read copies len(dst) bytes at off of r into dst, in chunks of verbChunk.
func (t *Transport) Read(dst []byte, r transport.Region, off uint64) error {
	if off+uint64(len(dst)) < off {
		return t.verbErr(opRead, r, off, uint64(len(dst)), stAccess)
	}
	if done, err := t.tryDirect(r, opRead, off, uint64(len(dst)), nil, dst); done {
		return err
	}
	for first := true; first || len(dst) > 0; first = false {
		k := min(len(dst), verbChunk)
		if _, err := t.verb(r, opRead, off, uint64(k), 0, 0, nil, dst[:k]); err != nil {
			return err
		}
		dst, off = dst[k:], off+uint64(k)
	}
	return nil
}

// Write copies src to off of r, in chunks of verbChunk. It is ordered after
// every earlier Send and verb of this node to the same peer (one ring, served
// in order).
func (t *Transport) Write(r transport.Region, off uint64, src []byte) error {
	if off+uint64(len(src)) < off {
		return t.verbErr(opWrite, r, off, uint64(len(src)), stAccess)
	}
	if done, err := t.tryDirect(r, opWrite, off, uint64(len(src)), src, nil); done {
		return err
	}
	for first := true; first || len(src) > 0; first = false {
		k := min(len(src), verbChunk)
		if _, err := t.verb(r, opWrite, off, uint64(k), 0, 0, src[:k], nil); err != nil {
			return err
		}
		src, off = src[k:], off+uint64(k)
	}
	return nil
}

// CompareAndSwap sets the word at off to new if it holds old.
func (t *Transport) CompareAndSwap(r transport.Region, off uint64, old, new uint64) (uint64, error) {
	return t.verb(r, opCAS, off, 8, old, new, nil, nil)
}

// FetchAndAdd adds delta to the word at off.
func (t *Transport) FetchAndAdd(r transport.Region, off uint64, delta uint64) (uint64, error) {
	return t.verb(r, opFAA, off, 8, 0, delta, nil, nil)
}

// verb performs one request: locally when the region is ours, else through
// the link to its node.
func (t *Transport) verb(r transport.Region, op byte, off, n, old, arg uint64, src, dst []byte) (uint64, error) {
	if r.Node == t.self {
		if t.closed.Load() {
			return 0, fmt.Errorf("shm: %s on node %d: %w", opName[op], t.self, transport.ErrClosed)
		}
		data, value, st := t.apply(op, r.Key, off, n, old, arg, src)
		if st != stOK {
			return 0, t.verbErr(op, r, off, n, st)
		}
		copy(dst, data)
		return value, nil
	}
	l, err := t.linkTo(r.Node)
	if err != nil {
		return 0, err
	}
	if op == opCAS || op == opFAA {
		if value, st, ok := l.direct(r.Key, op, off, n, old, arg, src, dst); ok {
			if st != stOK {
				return 0, t.verbErr(op, r, off, n, st)
			}
			return value, nil
		}
	}
	var req [protocol.FrameSize]byte
	req[0] = op
	le.PutUint32(req[4:], r.Key)
	le.PutUint64(req[16:], off)
	le.PutUint32(req[24:], uint32(n))
	le.PutUint64(req[32:], old)
	le.PutUint64(req[40:], arg)
	st, value, err := l.roundTrip(&req, src, dst)
	if err != nil {
		return 0, t.linkErr(l, opName[op], err)
	}
	if st != stOK {
		return 0, t.verbErr(op, r, off, n, st)
	}
	return value, nil
}

// tryDirect does a Read or Write of any length direct (direct.go) when it
// can; done false: take the ring.
func (t *Transport) tryDirect(r transport.Region, op byte, off, n uint64, src, dst []byte) (done bool, err error) {
	if r.Node == t.self || t.closed.Load() {
		return false, nil
	}
	p := t.peers[r.Node]
	if p == nil {
		return false, nil
	}
	l := p.live.Load()
	if l == nil || l.dead.Load() {
		return false, nil
	}
	_, st, ok := l.direct(r.Key, op, off, n, 0, 0, src, dst)
	if !ok {
		return false, nil
	}
	if st != stOK {
		return true, t.verbErr(op, r, off, n, st)
	}
	return true, nil
}

func (t *Transport) verbErr(op byte, r transport.Region, off, n uint64, st byte) error {
	what := fmt.Sprintf("shm: %s of %d bytes at offset %d of region %#x on node %d", opName[op], n, off, r.Key, r.Node)
	switch st {
	case stAccess:
		return fmt.Errorf("%s: %w", what, transport.ErrAccess)
	case stMisaligned:
		return fmt.Errorf("%s: %w", what, transport.ErrMisaligned)
	}
	return fmt.Errorf("%s: malformed request or answer (status %d)", what, st)
}

// apply performs one verb on this node's registered memory (applyMem); a
// read returns the bytes (aliasing the region). Key first.
func (t *Transport) apply(op byte, key uint32, off, n, old, arg uint64, src []byte) (data []byte, value uint64, st byte) {
	t.regMu.RLock()
	mem := t.regions[key]
	t.regMu.RUnlock()
	if mem == nil {
		return nil, 0, stAccess
	}
	if op == opRead && n > verbChunk {
		return nil, 0, stBad
	}
	return applyMem(mem, op, off, n, old, arg, src)
}

// serve answers one verb request from the peer (on the reader goroutine).
func (l *link) serve(frame, payload []byte) error {
	// Copy the header out of the shared ring first: the peer could change
	// it while we act on it.
	var req [protocol.FrameSize]byte
	copy(req[:], frame)
	op := req[0]
	data, value, st := l.t.apply(op, le.Uint32(req[4:]), le.Uint64(req[16:]), uint64(le.Uint32(req[24:])),
		le.Uint64(req[32:]), le.Uint64(req[40:]), payload)
	var resp [protocol.FrameSize]byte
	resp[0], resp[1] = op, st
	copy(resp[8:16], req[8:16])
	le.PutUint64(resp[16:], value)
	return l.respOut.put(kindVerbResp, resp[:], data)
}

// call is one verb waiting for its answer.
type call struct {
	id     uint64
	dst    []byte        // where a read's bytes go
	done   chan struct{} // one signal per use, from finish
	fin    atomic.Bool
	status byte
	value  uint64
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// finish completes c; whoever removed c from link.calls calls it, once.
func (c *call) finish(st byte, value uint64) {
	c.status, c.value = st, value
	c.fin.Store(true)
	c.done <- struct{}{}
}

// forget removes a call that gave up; false if someone already took it (and
// will finish it).
func (l *link) forget(id uint64) bool {
	l.callMu.Lock()
	defer l.callMu.Unlock()
	if _, ok := l.calls[id]; ok {
		delete(l.calls, id)
		return true
	}
	return false
}

// roundTrip sends a request and waits for its answer: the waiting callers
// take turns (respToken) draining the response ring, each until its own
// answer arrived, finishing other callers' calls on the way. A verb gives up
// after PeerTimeout of draining (a caller waiting for the token meanwhile
// waits at most one more PeerTimeout).
func (l *link) roundTrip(req *[protocol.FrameSize]byte, src, dst []byte) (byte, uint64, error) {
	c := callPool.Get().(*call)
	c.dst = dst
	c.fin.Store(false)
	defer func() { c.dst = nil; callPool.Put(c) }()
	l.callMu.Lock()
	if l.calls == nil {
		l.callMu.Unlock()
		return 0, 0, errOr(l.err(), transport.ErrPeerDown)
	}
	l.nextID++
	c.id = l.nextID
	l.calls[c.id] = c
	l.callMu.Unlock()
	le.PutUint64(req[8:], c.id)
	if err := l.send(kindVerbReq, req[:], src); err != nil {
		if !l.forget(c.id) {
			<-c.done
		}
		return 0, 0, err
	}
	deadline := time.Now().Add(l.t.cfg.PeerTimeout)
	for {
		select {
		case <-c.done:
			if c.status == stFailed {
				return 0, 0, errOr(l.err(), transport.ErrPeerDown)
			}
			return c.status, c.value, nil
		case <-l.respToken:
		}
		err := l.drain(c, deadline)
		l.respToken <- struct{}{}
		if err != nil {
			l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
		}
		if !c.fin.Load() && time.Now().After(deadline) {
			if l.forget(c.id) {
				return 0, 0, fmt.Errorf("%w: no answer within %v", transport.ErrPeerDown, l.t.cfg.PeerTimeout)
			}
		}
	}
}

// drain consumes answers (holding respToken) until c is finished, the link
// fails or the deadline passes.
func (l *link) drain(c *call, deadline time.Time) error {
	stopped := func() bool { return l.dead.Load() || c.fin.Load() }
	for !stopped() {
		_, frame, payload, n, err := l.respIn.next()
		if err != nil {
			return err
		}
		if n > 0 {
			l.complete(frame, payload)
			l.respIn.release(n)
			continue
		}
		if time.Now().After(deadline) {
			return nil
		}
		l.respIn.wait(stopped)
	}
	return nil
}

// drainStale consumes answers nobody waits for (their callers gave up), so
// they cannot fill the response ring; the reader calls it when idle.
func (l *link) drainStale() {
	select {
	case <-l.respToken:
	default:
		return // a caller is draining
	}
	defer func() { l.respToken <- struct{}{} }()
	for !l.dead.Load() {
		_, frame, payload, n, err := l.respIn.next()
		if err != nil {
			l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
			return
		}
		if n == 0 {
			return
		}
		l.complete(frame, payload)
		l.respIn.release(n)
	}
}

// complete hands an answer to its call, if that is still waiting.
func (l *link) complete(frame, payload []byte) {
	id := le.Uint64(frame[8:])
	l.callMu.Lock()
	c := l.calls[id]
	delete(l.calls, id)
	l.callMu.Unlock()
	if c == nil {
		return // the caller gave up
	}
	st := frame[1]
	if st == stOK && c.dst != nil {
		if len(payload) != len(c.dst) {
			st = stBad
		} else {
			copy(c.dst, payload)
		}
	}
	c.finish(st, le.Uint64(frame[16:]))
}
