package tcp

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// item is one encoded frame waiting in a peer's queue.
type item struct {
	buf    []byte
	pooled *[]byte // non-nil: buf goes back to msgPool once written
	call   *call   // non-nil: a verb request waiting for its reply
}

func (it item) release() {
	if it.pooled != nil {
		msgPool.Put(it.pooled)
	}
}

// call is a verb request in flight. Whoever removes it from the peer's
// pending map (the reply reader, a connection's cleanup, the caller giving
// up) completes it, exactly once.
type call struct {
	id    uint64
	gen   uint64 // the connection it was written on; 0: not yet written
	dst   []byte // Read: where the bytes go
	value uint64 // atomics: the previous word
	done  chan error
}

// peer is the outbound side of one member node: its queue, the goroutine
// that keeps a connection to it and writes the queue out, and the verb
// requests waiting for replies.
type peer struct {
	t     *Transport
	id    protocol.NodeID
	queue chan item

	addrMu      sync.Mutex
	addr        string
	addrChanged chan struct{} // wakes a waiting connection loop

	// down: unreachable for PeerTimeout; Send and verbs fail at once
	// instead of queueing. downWhy is the last failure when it went down
	// (a refused connection, a rejected handshake: the operator's clue).
	down    atomic.Bool
	downWhy atomic.Pointer[string]
	// failing is the current streak of failed connection attempts (nil
	// while connected), for PeerDown before the peer counts as down.
	failing atomic.Pointer[failure]

	mu      sync.Mutex
	pending map[uint64]*call
	nextID  uint64

	gen uint64 // connection generation, owned by run

	// queued counts the items in queue and the one the writer holds: a
	// direct write (TrySend) may go only when it is zero, or it would
	// overtake them.
	queued atomic.Int64
	// wmu is held by whoever writes to the connection: the writer
	// goroutine for a batch (flushed before it lets go), TrySend for one
	// message.
	wmu    sync.Mutex
	direct syscall.RawConn // under wmu: the live plain TCP connection, for TrySend
	rest   []byte          // under wmu: what TrySend could not write; the writer writes it first
	// corked: messages TrySendCorked held back while a drain handled
	// frames (cork.go); they follow rest and precede the queue, and go
	// with the connection when it fails, as rest does. dirty: p is on the
	// transport's list of peers to uncork.
	corked []byte // under wmu
	dirty  bool   // under wmu
}

func newPeer(t *Transport, id protocol.NodeID, addr string) *peer {
	return &peer{
		t:           t,
		id:          id,
		queue:       make(chan item, t.cfg.QueueLen),
		addr:        addr,
		addrChanged: make(chan struct{}, 1),
		pending:     map[uint64]*call{},
	}
}

func (p *peer) setAddr(addr string) {
	p.addrMu.Lock()
	p.addr = addr
	p.addrMu.Unlock()
	select {
	case p.addrChanged <- struct{}{}:
	default:
	}
}

func (p *peer) address() string {
	p.addrMu.Lock()
	defer p.addrMu.Unlock()
	return p.addr
}

// enqueue puts it in the queue, waiting while it is full until timeout
// (PeerTimeout if nil) or Close.
func (p *peer) enqueue(it item, timeout <-chan time.Time) error {
	p.queued.Add(1)
	select {
	case p.queue <- it:
		return nil
	default:
	}
	if timeout == nil {
		tm := time.NewTimer(p.t.cfg.PeerTimeout)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case p.queue <- it:
		return nil
	case <-p.t.done:
		it.release()
		p.queued.Add(-1)
		return transport.ErrClosed
	case <-timeout:
		it.release()
		p.queued.Add(-1)
		return fmt.Errorf("queue full for %v: %w", p.t.cfg.PeerTimeout, transport.ErrPeerDown)
	}
}

// newCall allocates a call with a fresh id.
func (p *peer) newCall(dst []byte) *call {
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.mu.Unlock()
	return &call{id: id, dst: dst, done: make(chan error, 1)}
}

// roundTrip sends the encoded request of c and waits for its reply, at
// most PeerTimeout in all.
func (p *peer) roundTrip(c *call, buf []byte) error {
	tm := time.NewTimer(p.t.cfg.PeerTimeout)
	defer tm.Stop()
	p.mu.Lock()
	p.pending[c.id] = c
	p.mu.Unlock()
	if err := p.enqueue(item{buf: buf, call: c}, tm.C); err != nil {
		return p.abandon(c, err)
	}
	select {
	case err := <-c.done:
		return err
	case <-tm.C:
		return p.abandon(c, fmt.Errorf("no reply within %v: %w", p.t.cfg.PeerTimeout, transport.ErrPeerDown))
	case <-p.t.done:
		return p.abandon(c, transport.ErrClosed)
	}
}

// abandon gives up on c with err, unless someone already took it: then
// its result is on the way.
func (p *peer) abandon(c *call, err error) error {
	if p.take(c.id, c) {
		return err
	}
	return <-c.done
}

// take removes the call id from the pending map (only if it is c, when c
// is given) and reports whether it did.
func (p *peer) take(id uint64, c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	got, ok := p.pending[id]
	if !ok || (c != nil && got != c) {
		return false
	}
	delete(p.pending, id)
	return true
}

// drop discards a queued item that will never be written.
func (p *peer) drop(it item, err error) {
	it.release()
	p.queued.Add(-1)
	if it.call != nil && p.take(it.call.id, it.call) {
		it.call.done <- err
	}
}

// drainQueue drops everything queued now.
func (p *peer) drainQueue(err error) {
	for {
		select {
		case it := <-p.queue:
			p.drop(it, err)
		default:
			return
		}
	}
}

// failSent fails the calls written on connection gen: their replies would
// have come on it.
func (p *peer) failSent(gen uint64, err error) {
	p.mu.Lock()
	var lost []*call
	for id, c := range p.pending {
		if c.gen == gen {
			delete(p.pending, id)
			lost = append(lost, c)
		}
	}
	p.mu.Unlock()
	for _, c := range lost {
		c.done <- err
	}
}

// run keeps a connection to the peer until Close: dial, handshake, write
// the queue out, and after a failure dial again with exponential backoff.
func (p *peer) run() {
	t := p.t
	defer t.wg.Done()
	log := t.log.With("peer", int(p.id))
	backoff := t.cfg.BackoffMin
	failingSince := time.Now() // not connected yet: the clock runs
	quiet := false             // the current failure streak was logged
	for !t.closed.Load() {
		addr := p.address()
		var err error
		if addr == "" {
			err = errors.New("no address yet")
		} else {
			var conn, raw net.Conn
			conn, raw, err = p.dial(addr)
			if err == nil {
				p.failing.Store(nil)
				if p.down.Swap(false) {
					log.Info("tcp: peer is back", "addr", addr)
				} else {
					log.Info("tcp: connected", "addr", addr)
				}
				backoff, quiet = t.cfg.BackoffMin, false
				p.gen++
				err = p.serve(conn, raw, p.gen)
				if t.closed.Load() {
					break
				}
				failingSince = time.Now()
				if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
					// The peer read nothing for PeerTimeout: it has been
					// failing that long already.
					failingSince = failingSince.Add(-t.cfg.PeerTimeout)
				}
				if errors.Is(err, errMalformed) {
					log.Error("tcp: malformed frame from peer, closing connection", "addr", addr, "err", err)
				} else {
					log.Warn("tcp: connection to peer lost, reconnecting", "addr", addr, "err", err)
				}
				err = nil // logged; redial after the shortest backoff
			}
		}
		if t.closed.Load() {
			break
		}
		var rej *rejectError
		var hs *handshakeError
		switch {
		case err == nil:
		case errors.As(err, &rej):
			// A misconfiguration: say so on every attempt.
			log.Error("tcp: peer rejected the handshake", "addr", addr, "reason", rej.reason.String())
		case errors.As(err, &hs):
			// Reached something that would not finish the handshake (a
			// TLS mismatch, not a node): likely misconfigured too.
			log.Error("tcp: handshake with peer failed", "addr", addr, "err", hs.err)
		case !quiet && addr != "":
			log.Warn("tcp: cannot reach peer, retrying", "addr", addr, "err", err)
			quiet = true
		default:
			log.Debug("tcp: cannot reach peer", "addr", addr, "err", err)
		}
		if err != nil {
			p.failing.Store(&failure{since: failingSince, err: err})
		}
		if err != nil && time.Since(failingSince) >= t.cfg.PeerTimeout && !p.down.Load() {
			why := err.Error()
			p.downWhy.Store(&why)
			p.down.Store(true)
			log.Error("tcp: peer down", "addr", addr, "after", t.cfg.PeerTimeout, "err", err)
			p.drainQueue(p.downErr())
		}
		if !p.wait(jitter(backoff)) {
			break
		}
		if err != nil {
			backoff = min(2*backoff, t.cfg.BackoffMax)
		}
	}
	p.drainQueue(transport.ErrClosed)
}

// jitter spreads d by ±25% so nodes restarted together do not dial in
// lockstep.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}

// wait sleeps d, or until the address changes; while the peer is down it
// keeps failing whatever is queued so senders never wait for it. False:
// closed.
func (p *peer) wait(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	for {
		var q chan item
		if p.down.Load() {
			q = p.queue
		}
		select {
		case <-tm.C:
			return true
		case <-p.addrChanged:
			return true
		case <-p.t.done:
			return false
		case it := <-q:
			p.drop(it, p.downErr())
		}
	}
}

// dial connects to addr and does the handshake; it returns the connection
// to use (TLS or raw) and the raw one (tracked, for Close).
func (p *peer) dial(addr string) (net.Conn, net.Conn, error) {
	t := p.t
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	raw, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("tcp: dialing node %d at %s: %w", p.id, addr, err)
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true) // frames are small and latency-bound; we batch ourselves
	}
	if !t.track(raw) {
		return nil, nil, transport.ErrClosed
	}
	conn, err := p.handshake(raw, addr)
	if err != nil {
		t.untrack(raw)
		var rej *rejectError
		if !errors.As(err, &rej) {
			err = &handshakeError{err}
		}
		return nil, nil, err
	}
	return conn, raw, nil
}

// handshakeError: the peer's address answered TCP but the handshake
// failed.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// handshake runs the dialer's side of the handshake on raw within
// HandshakeTimeout.
func (p *peer) handshake(raw net.Conn, addr string) (net.Conn, error) {
	t := p.t
	raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	conn := raw
	if t.cfg.TLS != nil {
		tc := tls.Client(raw, clientTLS(t.cfg.TLS, addr))
		if err := tc.HandshakeContext(t.ctx); err != nil {
			return nil, fmt.Errorf("tcp: TLS handshake with node %d at %s: %w", p.id, addr, err)
		}
		conn = tc
	}
	h := encodeHello(hello{version: version, from: uint16(t.self), to: uint16(p.id), cluster: t.cfg.ClusterID})
	if _, err := conn.Write(h); err != nil {
		return nil, fmt.Errorf("tcp: handshake with node %d at %s: %w", p.id, addr, err)
	}
	var ans [answerSize]byte
	if _, err := io.ReadFull(conn, ans[:]); err != nil {
		return nil, fmt.Errorf("tcp: handshake with node %d at %s: reading the answer: %w", p.id, addr, err)
	}
	r, node, err := decodeAnswer(ans[:])
	if err != nil {
		return nil, fmt.Errorf("tcp: handshake with node %d at %s: %w", p.id, addr, err)
	}
	if r != reasonOK {
		return nil, &rejectError{node: p.id, addr: addr, reason: r}
	}
	if node != uint16(p.id) {
		return nil, fmt.Errorf("tcp: handshake with node %d at %s: %w: reached node %d", p.id, addr, errBadAnswer, node)
	}
	raw.SetDeadline(time.Time{})
	return conn, nil
}

// serve writes the queue to conn until it fails or the transport closes,
// batching: it flushes only when the queue is empty. A second goroutine
// reads the verb replies.
func (p *peer) serve(conn, raw net.Conn, gen uint64) (err error) {
	t := p.t
	readerDone := make(chan error, 1)
	t.wg.Add(1) // run's own count keeps the group above zero
	go func() {
		defer t.wg.Done()
		readerDone <- p.readReplies(conn)
	}()
	defer func() {
		t.untrack(raw)
		if readerDone != nil {
			<-readerDone
		}
		p.failSent(gen, fmt.Errorf("connection to node %d lost: %w", p.id, transport.ErrPeerDown))
	}()
	bw := bufio.NewWriterSize(&timedWriter{conn: conn, timeout: t.cfg.PeerTimeout}, writerSize)
	if sc, ok := conn.(syscall.Conn); ok && t.cfg.TLS == nil {
		if rc, err := sc.SyscallConn(); err == nil {
			p.wmu.Lock()
			p.direct = rc
			p.wmu.Unlock()
			defer func() {
				p.wmu.Lock()
				p.direct, p.rest, p.corked = nil, p.rest[:0], p.corked[:0]
				p.wmu.Unlock()
			}()
		}
	}
	for {
		var it item
		select {
		case it = <-p.queue:
		case err = <-readerDone:
			readerDone = nil
			return err
		case <-t.done:
			return transport.ErrClosed
		}
		if err := p.writeBatch(bw, it, gen); err != nil {
			return err
		}
	}
}

// writeBatch writes it and whatever else is queued, then flushes, holding
// wmu throughout; a direct write's remainder goes first.
func (p *peer) writeBatch(bw *bufio.Writer, it item, gen uint64) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(p.rest) > 0 {
		if _, err := bw.Write(p.rest); err != nil {
			return err
		}
		p.rest = p.rest[:0]
	}
	if len(p.corked) > 0 {
		if _, err := bw.Write(p.corked); err != nil {
			return err
		}
		p.corked = p.corked[:0]
	}
	for more := true; more; {
		err := p.write(bw, it, gen)
		p.queued.Add(-1)
		if err != nil {
			return err
		}
		select {
		case it = <-p.queue:
		default:
			more = false
		}
	}
	return bw.Flush()
}

func (p *peer) write(bw *bufio.Writer, it item, gen uint64) error {
	defer it.release()
	if c := it.call; c != nil {
		p.mu.Lock()
		live := p.pending[c.id] == c
		if live {
			c.gen = gen
		}
		p.mu.Unlock()
		if !live {
			return nil // its caller gave up before it left
		}
	}
	_, err := bw.Write(it.buf)
	return err
}

// readReplies reads verb replies from conn and completes their calls.
func (p *peer) readReplies(conn net.Conn) error {
	fr := frameReader{br: bufio.NewReaderSize(conn, readerSize), allowed: dialerKinds}
	for {
		_, body, err := fr.next()
		if err != nil {
			return err
		}
		r, err := decodeReply(body)
		if err != nil {
			return err
		}
		if err := p.complete(r); err != nil {
			return err
		}
	}
}

// complete hands a reply to its call, if the caller still waits.
func (p *peer) complete(r reply) error {
	p.mu.Lock()
	c := p.pending[r.id]
	delete(p.pending, r.id)
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	var err error
	switch r.status {
	case statusOK:
		if len(r.data) != len(c.dst) {
			err = fmt.Errorf("%w: reply of %d bytes to a read of %d", errMalformed, len(r.data), len(c.dst))
		}
		copy(c.dst, r.data)
		c.value = r.value
	case statusAccess:
		err = transport.ErrAccess
	case statusMisaligned:
		err = transport.ErrMisaligned
	default:
		err = fmt.Errorf("%w: node %d refused the request as malformed", errMalformed, p.id)
	}
	c.done <- err
	if errors.Is(err, errMalformed) && r.status == statusOK {
		return err // the peer broke the format: drop the connection
	}
	return nil
}

// downErr is the error of a Send or verb to a peer that is down: it names
// the peer and the last failure.
func (p *peer) downErr() error {
	why := "unreachable"
	if w := p.downWhy.Load(); w != nil {
		why = *w
	}
	return fmt.Errorf("node %d is down (%s): %w", p.id, why, transport.ErrPeerDown)
}

// failure is a streak of failed connection attempts.
type failure struct {
	since time.Time
	err   error
}
