package ibverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/transport"
)

// One-sided verbs (read, write, compare-and-swap, fetch-and-add) go on a
// queue pair of their own per peer and direction, not on the message queue
// pair, for one reason: a wrong rkey or bounds is an error of the caller
// that RC turns into the error state of BOTH ends of the connection. On
// the message queue pair that would lose messages in flight; here it loses
// nothing. The requester re-connects the pair (RESET, INIT, RTR, RTS with a
// fresh PSN on both ends, the peer's end re-connected through the TCP
// control channel), retries the requests that were flushed behind the bad
// one, and reports transport.ErrAccess for the bad one only.
//
// Every one-sided request is signaled (its caller waits for the result), so
// each one in flight produces exactly one completion: success, its own
// error, or "flushed". Requests in flight are bounded by the bounce
// buffers (Config.OneSidedBuffers), which also bounds the send queue.

// osLink is this node's requester queue pair for one-sided verbs to a peer.
type osLink struct {
	p  *peer
	qp QP

	mu         sync.Mutex
	epoch      uint64 // bumped by every re-connection
	inflight   int
	recovering bool
	ready      chan struct{} // closed when the running re-connection ends
	retrying   int           // flushed requests still to be re-posted
	retried    chan struct{} // closed when retrying drops to zero
	dead       error

	// replyBE: the device returns the previous value of an atomic big
	// endian (found by the probe at connection time).
	replyBE bool
}

// osOp is one one-sided request waiting for its completion.
type osOp struct {
	link   *osLink
	epoch  uint64
	posted bool // under link.mu: counted in link.inflight
	done   chan Status
}

func (t *Transport) addOp(op *osOp) uint64 {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	t.nextOp++
	id := t.nextOp
	t.pending[id] = op
	return id
}

// finishOp delivers a completion to its waiter (once). A synthetic one
// (from flushOps) only finishes requests that were posted: one that is
// registered but not yet posted will see the new epoch and drop itself.
func (t *Transport) finishOp(id uint64, st Status, synthetic bool) {
	t.pmu.Lock()
	op := t.pending[id]
	if op == nil {
		t.pmu.Unlock()
		return // a request of an earlier epoch, already flushed
	}
	op.link.mu.Lock()
	if synthetic && !op.posted {
		op.link.mu.Unlock()
		t.pmu.Unlock()
		return
	}
	delete(t.pending, id)
	if op.posted {
		op.link.inflight--
	}
	op.link.mu.Unlock()
	t.pmu.Unlock()
	op.done <- st
}

func (t *Transport) dropOp(id uint64) {
	t.pmu.Lock()
	delete(t.pending, id)
	t.pmu.Unlock()
}

// flushOps completes the requests of l's old epoch that got no completion
// before the queue pair was reset (RESET drops them silently).
func (t *Transport) flushOps(l *osLink, epoch uint64) {
	t.pmu.Lock()
	var ids []uint64
	for id, op := range t.pending {
		if op.link == l && op.epoch == epoch {
			ids = append(ids, id)
		}
	}
	t.pmu.Unlock()
	for _, id := range ids {
		t.finishOp(id, StatusFlushed, true)
	}
}

// waitReady waits out a running re-connection and returns the epoch to
// post in. A new request (retry false) also waits while requests flushed
// by the last error are still to be re-posted: they go first, so a caller
// that keeps making bad requests cannot starve the others (each epoch, the
// requests queued before the first bad one complete).
func (l *osLink) waitReady(retry bool) (uint64, error) {
	for {
		l.mu.Lock()
		if l.dead != nil {
			err := l.dead
			l.mu.Unlock()
			return 0, err
		}
		var ch chan struct{}
		switch {
		case l.recovering:
			ch = l.ready
		case !retry && l.retrying > 0:
			ch = l.retried
		default:
			e := l.epoch
			l.mu.Unlock()
			return e, nil
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-l.p.t.closing:
			return 0, fmt.Errorf("%w: one-sided verb to node %d", transport.ErrClosed, l.p.id)
		case <-l.p.downCh:
			return 0, l.p.err()
		}
	}
}

// retryDone ends one pending retry (l.mu held).
func (l *osLink) retryDone() {
	l.retrying--
	if l.retrying == 0 {
		close(l.retried)
	}
}

// do posts one signaled request on l and waits for its completion,
// re-connecting and retrying after a flush. It returns the final status and
// the epoch the request ran in.
func (l *osLink) do(wr WorkRequest) (st Status, epoch uint64, err error) {
	t := l.p.t
	retry := false
	defer func() {
		if retry {
			l.mu.Lock()
			l.retryDone()
			l.mu.Unlock()
		}
	}()
	for {
		if epoch, err = l.waitReady(retry); err != nil {
			return 0, 0, err
		}
		op := &osOp{link: l, epoch: epoch, done: make(chan Status, 1)}
		id := t.addOp(op)
		wr.ID = idOS<<idKindShift | id
		wr.Flags |= FlagSignaled
		l.mu.Lock()
		if l.recovering || l.epoch != epoch || (!retry && l.retrying > 0) {
			l.mu.Unlock()
			t.dropOp(id)
			continue
		}
		if retry {
			retry = false
			l.retryDone()
		}
		l.inflight++
		op.posted = true
		err = l.qp.Post([]WorkRequest{wr})
		if err != nil {
			l.inflight--
			op.posted = false
		}
		l.mu.Unlock()
		if err != nil {
			t.dropOp(id)
			return 0, 0, fmt.Errorf("%w: posting a %v to node %d: %v", transport.ErrPeerDown, wr.Op, l.p.id, err)
		}
		if st, err = l.wait(op, id); err != nil {
			return 0, 0, err
		}
		if st != StatusFlushed {
			return st, epoch, nil
		}
		// Flushed behind another request's error: not executed, so
		// retrying it is safe. It goes before any new request.
		l.mu.Lock()
		if l.retrying == 0 {
			l.retried = make(chan struct{})
		}
		l.retrying++
		retry = true
		l.mu.Unlock()
		if err := l.recover(epoch); err != nil {
			return 0, 0, err
		}
	}
}

// errBufferBusy marks an error after which the request's bounce buffer may
// still be written by the NIC: it is not reused.
var errBufferBusy = errors.New("ibverbs: request still owned by the device")

func (l *osLink) wait(op *osOp, id uint64) (Status, error) {
	t := l.p.t
	timer := time.NewTimer(t.cfg.PeerTimeout)
	defer timer.Stop()
	var err error
	select {
	case st := <-op.done:
		return st, nil
	case <-t.closing:
		// Close destroys the queue pairs before it unmaps the buffers.
		return 0, fmt.Errorf("%w: one-sided verb to node %d", transport.ErrClosed, l.p.id)
	case <-l.p.downCh:
		err = l.p.err()
	case <-timer.C:
		// No completion at all, not even "retry exceeded", which the
		// NIC reports within its own timeout: the device is stuck.
		err = fmt.Errorf("%w: no completion from node %d within %v", transport.ErrPeerDown, l.p.id, t.cfg.PeerTimeout)
		l.p.fail(err)
	}
	// The request may still be executing and write into its buffer: stop
	// the pair and wait for the flush before the buffer is reused.
	_ = l.qp.Fail()
	select {
	case <-op.done:
		return 0, err
	case <-t.closing:
		return 0, err
	case <-time.After(time.Second):
		return 0, fmt.Errorf("%w (%w)", err, errBufferBusy)
	}
}

// recover re-connects l after an error in epoch (once per epoch however
// many requests saw the error) and returns when l is usable or dead.
func (l *osLink) recover(epoch uint64) error {
	l.mu.Lock()
	if l.recovering {
		ch := l.ready
		l.mu.Unlock()
		select {
		case <-ch:
		case <-l.p.t.closing:
			return fmt.Errorf("%w: re-connecting to node %d", transport.ErrClosed, l.p.id)
		}
		l.mu.Lock()
		err := l.dead
		l.mu.Unlock()
		return err
	}
	if l.epoch != epoch || l.dead != nil {
		err := l.dead
		l.mu.Unlock()
		return err
	}
	l.recovering = true
	l.ready = make(chan struct{})
	l.mu.Unlock()

	err := l.reconnect(epoch)

	l.mu.Lock()
	l.epoch++
	l.recovering = false
	if err != nil {
		l.dead = err
		l.p.fail(err)
	}
	close(l.ready)
	l.mu.Unlock()
	return err
}

// reconnect brings both ends of l's connection back to RTS.
func (l *osLink) reconnect(epoch uint64) error {
	t := l.p.t
	// Flush what is queued and wait for the completions, so every waiter
	// learns its request was not executed; after RESET none would come.
	_ = l.qp.Fail()
	deadline := time.Now().Add(time.Second)
	b := backoff{busy: t.cfg.BusyPoll}
	for {
		l.mu.Lock()
		n := l.inflight
		l.mu.Unlock()
		if n <= 0 || time.Now().After(deadline) || t.closed.Load() {
			break
		}
		b.wait()
	}
	if err := l.qp.Reset(); err != nil {
		return fmt.Errorf("%w: resetting the one-sided queue pair to node %d: %v", transport.ErrPeerDown, l.p.id, err)
	}
	t.flushOps(l, epoch)
	psn := newPSN()
	req := Record{Kind: KindReset, From: t.self, To: l.p.id, LID: t.port.LID, GID: t.port.GID, MTU: t.mtu,
		OSOut: QPNum{QPN: l.qp.Num(), PSN: psn}}
	resp, err := l.p.call(req)
	if err != nil {
		return err
	}
	if err := l.qp.Connect(psn, QPInfo{LID: resp.LID, GID: resp.GID, QPN: resp.OSIn.QPN, PSN: resp.OSIn.PSN,
		MTU: int(min(t.mtu, resp.MTU))}); err != nil {
		return fmt.Errorf("%w: re-connecting the one-sided queue pair to node %d: %v", transport.ErrPeerDown, l.p.id, err)
	}
	return nil
}

// handleReset is the peer side of reconnect: re-connect our responder end
// of the peer's one-sided queue pair.
func (t *Transport) handleReset(p *peer, r Record) error {
	if r.OSOut.QPN != p.remote.OSOut.QPN {
		return fmt.Errorf("%w: node %d asked to reset queue pair %#x, it set up %#x", ErrRecord, p.id, r.OSOut.QPN, p.remote.OSOut.QPN)
	}
	p.osInMu.Lock()
	defer p.osInMu.Unlock()
	if err := p.osIn.Reset(); err != nil {
		return fmt.Errorf("resetting the responder for node %d: %w", p.id, err)
	}
	psn := newPSN()
	if err := p.osIn.Connect(psn, QPInfo{LID: r.LID, GID: r.GID, QPN: r.OSOut.QPN, PSN: r.OSOut.PSN,
		MTU: int(min(t.mtu, r.MTU))}); err != nil {
		return fmt.Errorf("re-connecting the responder for node %d: %w", p.id, err)
	}
	return p.writeControl(Record{Kind: KindResetDone, From: t.self, To: p.id, LID: t.port.LID, GID: t.port.GID,
		MTU: t.mtu, OSIn: QPNum{QPN: p.osIn.Num(), PSN: psn}})
}

// oneSided runs wr (its local side in a bounce buffer) on p's one-sided
// queue pair and maps the outcome to the transport's errors.
func (t *Transport) oneSided(p *peer, wr WorkRequest, what string) error {
	l := p.os
	st, epoch, err := l.do(wr)
	switch {
	case err != nil:
		return err
	case st == StatusSuccess:
		return nil
	case st == StatusRetryExceeded:
		err := fmt.Errorf("%w: %s on node %d: %v", transport.ErrPeerDown, what, p.id, st)
		p.fail(err)
		return err
	}
	// The error moved both ends to the error state: re-connect before
	// returning, so the caller's next verb finds the pair usable.
	if err := l.recover(epoch); err != nil {
		return err
	}
	switch st {
	case StatusRemoteAccess, StatusRemoteInvalid, StatusRemoteOp:
		return fmt.Errorf("%w: %s on node %d: %v", transport.ErrAccess, what, p.id, st)
	}
	return fmt.Errorf("ibverbs: %s on node %d: %v", what, p.id, st)
}

// chunk is one bounce buffer: registered staging memory for one request.
type chunk struct {
	i    int
	mem  []byte
	addr uint64
}

func (t *Transport) getChunk() (chunk, error) {
	select {
	case i := <-t.chunks:
		off := t.chunkOff + i*OneSidedChunk
		return chunk{i: i, mem: t.sendMem[off : off+OneSidedChunk], addr: t.sendMR.Addr + uint64(off)}, nil
	case <-t.closing:
		return chunk{}, fmt.Errorf("%w: one-sided verb", transport.ErrClosed)
	}
}

// putChunk returns a bounce buffer after its request ended with err; a
// buffer the device may still write into is never reused (a stuck device
// can leak at most OneSidedBuffers of them).
func (t *Transport) putChunk(c chunk, err error) {
	if !errors.Is(err, errBufferBusy) {
		t.chunks <- c.i
	}
}

// target checks a one-sided request against what this node knows of the
// region (its node and length); the key is the responder's to check.
func (t *Transport) target(r transport.Region, off, n uint64) (*peer, error) {
	if r.Node == t.self {
		return nil, fmt.Errorf("%w: one-sided verbs on this node's own region (use the memory directly)", transport.ErrUnknownPeer)
	}
	p, err := t.peerFor(r.Node)
	if err != nil {
		return nil, err
	}
	if end := off + n; end < off || end > r.Len {
		return nil, fmt.Errorf("%w: %d bytes at offset %d of a %d-byte region on node %d", transport.ErrAccess, n, off, r.Len, r.Node)
	}
	return p, nil
}

// Read implements transport.OneSided.
func (t *Transport) Read(dst []byte, r transport.Region, off uint64) error {
	p, err := t.target(r, off, uint64(len(dst)))
	if err != nil || len(dst) == 0 {
		return err
	}
	if !t.enter() {
		return fmt.Errorf("%w: read from node %d", transport.ErrClosed, r.Node)
	}
	defer t.leave()
	for done := 0; done < len(dst); {
		n := min(len(dst)-done, OneSidedChunk)
		c, err := t.getChunk()
		if err != nil {
			return err
		}
		wr := WorkRequest{Op: OpRead, LocalAddr: c.addr, Length: uint32(n), LKey: t.sendMR.LKey,
			RemoteAddr: off + uint64(done), RKey: r.Key}
		err = t.oneSided(p, wr, fmt.Sprintf("read of %d bytes at offset %d of region %#x", n, off+uint64(done), r.Key))
		if err == nil {
			copy(dst[done:done+n], c.mem)
		}
		t.putChunk(c, err)
		if err != nil {
			return err
		}
		done += n
	}
	return nil
}

// Write implements transport.OneSided. It is ordered after this node's
// earlier messages to the same peer by fencing the message queue pair
// first (a no-op unless messages are still in flight).
func (t *Transport) Write(r transport.Region, off uint64, src []byte) error {
	p, err := t.target(r, off, uint64(len(src)))
	if err != nil || len(src) == 0 {
		return err
	}
	if !t.enter() {
		return fmt.Errorf("%w: write to node %d", transport.ErrClosed, r.Node)
	}
	defer t.leave()
	if err := p.msg.fence(); err != nil {
		return err
	}
	for done := 0; done < len(src); {
		n := min(len(src)-done, OneSidedChunk)
		c, err := t.getChunk()
		if err != nil {
			return err
		}
		copy(c.mem, src[done:done+n])
		wr := WorkRequest{Op: OpWrite, LocalAddr: c.addr, Length: uint32(n), LKey: t.sendMR.LKey,
			RemoteAddr: off + uint64(done), RKey: r.Key}
		err = t.oneSided(p, wr, fmt.Sprintf("write of %d bytes at offset %d of region %#x", n, off+uint64(done), r.Key))
		t.putChunk(c, err)
		if err != nil {
			return err
		}
		done += n
	}
	return nil
}

func (t *Transport) atomic(op Opcode, r transport.Region, off, a, b uint64) (uint64, error) {
	if off%8 != 0 {
		return 0, fmt.Errorf("%w: %v at offset %d of region %#x on node %d", transport.ErrMisaligned, op, off, r.Key, r.Node)
	}
	p, err := t.target(r, off, 8)
	if err != nil {
		return 0, err
	}
	if !t.enter() {
		return 0, fmt.Errorf("%w: %v on node %d", transport.ErrClosed, op, r.Node)
	}
	defer t.leave()
	c, err := t.getChunk()
	if err != nil {
		return 0, err
	}
	wr := WorkRequest{Op: op, LocalAddr: c.addr, Length: 8, LKey: t.sendMR.LKey, RemoteAddr: off, RKey: r.Key,
		CompareAdd: a, Swap: b}
	err = t.oneSided(p, wr, fmt.Sprintf("%v at offset %d of region %#x", op, off, r.Key))
	defer t.putChunk(c, err)
	if err != nil {
		return 0, err
	}
	if p.os.replyBE {
		return binary.BigEndian.Uint64(c.mem), nil
	}
	return binary.LittleEndian.Uint64(c.mem), nil
}

// CompareAndSwap implements transport.OneSided.
func (t *Transport) CompareAndSwap(r transport.Region, off uint64, old, new uint64) (uint64, error) {
	return t.atomic(OpCompareSwap, r, off, old, new)
}

// FetchAndAdd implements transport.OneSided.
func (t *Transport) FetchAndAdd(r transport.Region, off uint64, delta uint64) (uint64, error) {
	return t.atomic(OpFetchAdd, r, off, delta, 0)
}

// Probe values: distinct under byte reversal, so the reply tells the
// device's byte order apart.
const (
	probeInit = 0x0102030405060708
	probeSwap = 0x1112131415161718
)

var errProbe = errors.New("ibverbs: atomic byte-order probe failed")

// probe runs once per peer at connection time: a compare-and-swap on the
// peer's probe word (initialised to probeInit) tells whether the NIC
// returns atomic results in host or big-endian order (several Mellanox
// NICs return them big endian on little-endian hosts), and reading the word
// back tells whether the swap acted on the little-endian value, which the
// Transport contract (atomics agree with the owner's sync/atomic) needs.
func (t *Transport) probe(p *peer) (err error) {
	c, err := t.getChunk()
	if err != nil {
		return err
	}
	defer func() { t.putChunk(c, err) }()
	wr := WorkRequest{Op: OpCompareSwap, LocalAddr: c.addr, Length: 8, LKey: t.sendMR.LKey,
		RemoteAddr: p.remote.ProbeAddr, RKey: p.remote.RingKey, CompareAdd: probeInit, Swap: probeSwap}
	if err := t.oneSided(p, wr, "atomic probe"); err != nil {
		return fmt.Errorf("%w: %w", errProbe, err)
	}
	switch raw := binary.LittleEndian.Uint64(c.mem); raw {
	case probeInit:
	case bits.ReverseBytes64(probeInit):
		p.os.replyBE = true
	default:
		return fmt.Errorf("%w: node %d returned %#x for a word holding %#x", errProbe, p.id, raw, uint64(probeInit))
	}
	wr = WorkRequest{Op: OpRead, LocalAddr: c.addr, Length: 8, LKey: t.sendMR.LKey,
		RemoteAddr: p.remote.ProbeAddr, RKey: p.remote.RingKey}
	if err := t.oneSided(p, wr, "atomic probe read-back"); err != nil {
		return fmt.Errorf("%w: %w", errProbe, err)
	}
	if v := binary.LittleEndian.Uint64(c.mem); v != probeSwap {
		return fmt.Errorf("%w: after compare-and-swap the word on node %d holds %#x, want %#x: the device's atomics do not act on little-endian words",
			errProbe, p.id, v, uint64(probeSwap))
	}
	return nil
}
