package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Run to completion over TCP. On a machine with few cores every goroutine
// hand-off on a round trip waits for the scheduler: a request that reaches
// a peer waits for its reader goroutine to be woken, and the reply for the
// requester's. So plain TCP connections can be consumed by any goroutine
// that polls (Poll), as the shared-memory rings are: a worker that waits
// for a reply reads its sockets itself with non-blocking reads and runs the
// handler inline, and a message whose peer connection is idle is written
// by its sender (TrySend) instead of the writer goroutine. The goroutines
// stay for when no worker runs. TLS connections keep the goroutines only:
// their records cannot be read from the socket by several goroutines.

// errAgain: the socket has nothing more to read now.
var errAgain = errors.New("tcp: would block")

// fdReader reads a non-blocking socket: it never waits, io.EOF at the end,
// errAgain when nothing is there. fd is set by whoever holds the
// connection's consumer lock, for the call it makes.
type fdReader struct{ fd int }

func (r *fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(r.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, errAgain
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// polledConn is an inbound plain TCP connection that pollers and its
// reader goroutine consume in turns, under mu.
type polledConn struct {
	t   *Transport
	raw net.Conn
	rc  syscall.RawConn

	mu  sync.Mutex
	src fdReader
	in  *inStream
	err error // set by a poller that hit the connection's end or a bad frame
}

// drain handles what is buffered and what the socket holds now, until it
// would block; it returns how many frames it handled. Called under mu, from
// a RawConn callback (which keeps fd open).
func (c *polledConn) drain(fd uintptr) (int, error) {
	c.src.fd = int(fd)
	c.t.cork()
	defer c.t.uncork()
	n := 0
	for {
		if n > 0 && n%corkFrames == 0 {
			c.t.flushCorked()
		}
		k, body, err := c.in.fr.next()
		if err != nil {
			if ferr := c.in.flush(); ferr != nil && errors.Is(err, errAgain) {
				err = ferr
			}
			return n, err
		}
		if err := c.in.dispatch(k, body); err != nil {
			return n, err
		}
		c.in.fr.release()
		n++
	}
}

// receivePolled is the reader goroutine of a plain TCP connection: it
// waits for the socket to become readable (holding no lock, so pollers can
// consume meanwhile), then drains it under the consumer lock.
func (t *Transport) receivePolled(c *polledConn) error {
	var derr error
	err := c.rc.Read(func(fd uintptr) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			derr = c.err
			return true
		}
		_, derr = c.drain(fd)
		if errors.Is(derr, errAgain) {
			derr = nil
			return false // wait for the next readiness
		}
		c.err = derr
		return true
	})
	if derr != nil {
		return derr
	}
	if err == nil {
		err = net.ErrClosed
	}
	// Taking the lock waits out a poller still draining; after it none
	// starts, so a reconnected peer's next connection cannot be overtaken.
	c.mu.Lock()
	if c.err != nil {
		err = c.err // a poller found the end first and closed the socket
	} else {
		c.err = net.ErrClosed
	}
	c.mu.Unlock()
	return err
}

// Poll consumes what the peers have sent and this node's reader goroutines
// have not taken yet, calling the handler (and serving verb requests) on
// the caller's goroutine, and returns how many frames it handled. It never
// waits: a connection whose reader is consuming is skipped. The caller
// must not hold anything the handler takes.
func (t *Transport) Poll() int {
	cs := t.polled.Load()
	if cs == nil {
		return 0
	}
	n := 0
	for _, c := range *cs {
		if !c.mu.TryLock() {
			continue
		}
		if c.err != nil {
			c.mu.Unlock()
			continue
		}
		var derr error
		if err := c.rc.Control(func(fd uintptr) {
			var got int
			got, derr = c.drain(fd)
			n += got
		}); err != nil {
			derr = err
		}
		fail := derr != nil && !errors.Is(derr, errAgain)
		if fail {
			c.err = derr
		}
		c.mu.Unlock()
		if fail {
			// The reader goroutine waits for readiness: closing wakes it,
			// and it reports c.err.
			c.raw.Close()
		}
	}
	return n
}

// setPolled publishes the connections pollers consume (under inMu).
func (t *Transport) setPolledLocked() {
	var cs []*polledConn
	for _, ic := range t.inbound {
		if ic.polled != nil {
			cs = append(cs, ic.polled)
		}
	}
	t.polled.Store(&cs)
}

// TrySend is Send that never waits: it writes the message to the peer's
// socket on the caller's goroutine when the connection is up, plain TCP,
// and nothing is queued before it, and reports false (sending nothing)
// otherwise; the caller then uses Send. What the socket does not take is
// left to the writer goroutine, ahead of anything queued.
func (t *Transport) TrySend(to protocol.NodeID, frame, payload []byte) (bool, error) {
	return t.trySend(to, frame, payload, false)
}

// TrySendCorked is TrySend for a handler of a frame this transport
// delivered: while the drain that called the handler runs, the message
// waits in the peer's corked buffer, and is written with the others when
// the drain ends (cork.go). Only a drain's own handlers may cork: a
// message of another goroutine would wait on a drain it does not know
// the end of.
func (t *Transport) TrySendCorked(to protocol.NodeID, frame, payload []byte) (bool, error) {
	return t.trySend(to, frame, payload, true)
}

func (t *Transport) trySend(to protocol.NodeID, frame, payload []byte, cork bool) (bool, error) {
	if t.closed.Load() {
		return false, fmt.Errorf("tcp: send to node %d: %w", to, transport.ErrClosed)
	}
	if len(frame) != protocol.FrameSize || len(payload) > transport.MaxPayload {
		return false, fmt.Errorf("tcp: send to node %d: frame of %d bytes, payload of %d: %w",
			to, len(frame), len(payload), transport.ErrFrameSize)
	}
	p := t.peer(to)
	if p == nil {
		return false, fmt.Errorf("tcp: send to node %d: %w", to, transport.ErrUnknownPeer)
	}
	if p.down.Load() {
		return false, fmt.Errorf("tcp: send: %w", p.downErr())
	}
	if p.queued.Load() != 0 || !p.wmu.TryLock() {
		return false, nil
	}
	defer p.wmu.Unlock()
	if p.direct == nil || p.queued.Load() != 0 {
		return false, nil
	}
	if len(p.corked)+hdrSize+len(frame)+len(payload) > corkBytes && !p.sendCorkedLocked() {
		return false, nil // the connection is failing: the writer finds out
	}
	before := len(p.corked)
	b := appendHeader(p.corked, kindMsg, len(frame)+len(payload))
	b = append(b, frame...)
	p.corked = append(b, payload...)
	t.directMsgs.Add(1)
	if cork && p.t.corks.Load() > 0 && p.holdLocked() {
		return true, nil // a drain's uncork writes it with its neighbours
	}
	if !p.sendCorkedLocked() {
		p.corked = p.corked[:before]
		t.directMsgs.Add(-1)
		return false, nil // the connection is failing: the writer finds out
	}
	return true, nil
}

// pollable wraps conn for pollers: a plain TCP connection, nil for TLS.
func (t *Transport) pollable(conn net.Conn, from protocol.NodeID) *polledConn {
	sc, ok := conn.(syscall.Conn)
	if !ok || t.tlsServer != nil {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	c := &polledConn{t: t, raw: conn, rc: rc}
	c.in = t.newInStream(&c.src, conn, from)
	return c
}

// PollInterval is how often a node's operations poll at their start
// (actors.Local.SetPoller): a poll is a system call per connection, about
// 1.6 us in this machine's VM, dearer than an operation that hits in
// memory; a peer's request waits at most this long for a worker that runs.
func (t *Transport) PollInterval() time.Duration { return pollInterval }

var pollInterval = 20 * time.Microsecond
