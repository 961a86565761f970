package tcp

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Corking: one write per peer per batch of frames handled, not one per
// message.
//
// A node that handles a batch of received frames answers many of them to
// the same peers: a primary acknowledges a run of write-throughs to their
// writer and forwards each to its backup. Written one by one, each message
// costs a write(2), and on this 2-core VM the system calls were most of a
// replicated SET's cost. So while a poller drains frames (corks > 0), a
// message its handlers send (TrySendCorked) is appended to the peer's
// corked buffer instead of written, and the drain writes every corked
// peer's buffer in one call when it ends (and every corkFrames frames, so a long drain does not hold
// answers back). Per-peer order is kept: corked follows rest (a partial
// direct write) and precedes the writer goroutine's queue, which TrySend
// does not pass while anything is queued; a TrySend writes what is corked
// before its own message.
//
// What is corked when its connection fails goes with it, as what was
// written to the connection does: the peer's next connection may be to a
// new process, which must not get the old one's messages. A TrySend whose
// own write finds the connection failing reports false, as before corking,
// and its caller queues the message instead.

const (
	// corkFrames: a drain uncorks after this many frames as well as at its
	// end.
	corkFrames = 64
	// corkBytes: a peer's corked buffer is written at once past this size.
	corkBytes = 64 << 10
)

// cork starts a batch of frames whose answers go out together.
func (t *Transport) cork() { t.corks.Add(1) }

// uncork ends a batch: every corked peer's buffer is written.
func (t *Transport) uncork() {
	t.corks.Add(-1)
	t.flushCorked()
}

// flushCorked writes the buffer of every peer on the dirty list. It takes
// them off one at a time: a peer's wmu is never taken under dirtyMu
// (holdLocked takes them the other way round).
func (t *Transport) flushCorked() {
	for {
		t.dirtyMu.Lock()
		last := len(t.dirty) - 1
		if last < 0 {
			t.dirtyMu.Unlock()
			return
		}
		p := t.dirty[last]
		t.dirty[last] = nil
		t.dirty = t.dirty[:last]
		t.dirtyMu.Unlock()
		p.wmu.Lock()
		p.dirty = false
		p.sendCorkedLocked()
		p.wmu.Unlock()
	}
}

// holdLocked puts p on the dirty list (under p.wmu). It reports false
// when no drain is running any longer, so no uncork is sure to see p: the
// caller then writes the buffer itself. The list is joined before corks is
// read again: a drain that is still running then ends after it, and its
// uncork (which lowers corks before it takes the list) sees p.
func (p *peer) holdLocked() bool {
	t := p.t
	if !p.dirty {
		p.dirty = true
		t.dirtyMu.Lock()
		t.dirty = append(t.dirty, p)
		t.dirtyMu.Unlock()
	}
	return t.corks.Load() > 0
}

// sendCorkedLocked writes p.corked to the live connection without waiting
// (under p.wmu). What the socket does not take is left to the writer
// goroutine: a partial message's remainder as rest, whole messages in
// corked. It reports false when the connection is failing (nothing was
// written): what is corked then goes with the connection, as what was
// written to it does.
//
// While rest holds a cut message's remainder nothing is written: the
// writer goroutine, already woken for rest, writes it and then corked.
// Writing corked here would put whole messages inside the cut one.
//
// The write goes through Control, not RawConn.Write: Write refuses at
// once when the writer goroutine's write deadline (timedWriter, renewed
// only when the writer writes) has passed, which on a connection whose
// messages all went direct for PeerTimeout is not a failure. Holding
// wmu serialises it with the writer as Write's lock would.
func (p *peer) sendCorkedLocked() bool {
	b := p.corked
	if len(b) == 0 || p.direct == nil || len(p.rest) > 0 {
		return p.direct != nil
	}
	var n int
	var werr error
	if err := p.direct.Control(func(fd uintptr) {
		for {
			n, werr = unix.Write(int(fd), b)
			if werr != unix.EINTR {
				return
			}
		}
	}); err != nil || (werr != nil && werr != unix.EAGAIN) {
		// The connection is failing. The writer finds out (and the
		// connection's end drops what is corked) or, if the error
		// passes, writes it: nothing is left without an owner.
		p.wakeWriter()
		return false
	}
	p.t.directWrites.Add(1)
	if n < 0 {
		n = 0
	}
	if n < len(b) {
		// The remainder of the message that was cut goes to rest (it
		// belongs to this connection); whole messages stay corked.
		cut := messageEnd(b, n)
		p.rest = append(p.rest, b[n:cut]...)
		p.corked = p.corked[:copy(p.corked, b[cut:])]
		p.wakeWriter()
		return true
	}
	p.corked = p.corked[:0]
	return true
}

// messageEnd is the offset in b (whole encoded messages) where the message
// that holds offset n ends; n itself when a message starts there.
func messageEnd(b []byte, n int) int {
	off := 0
	for off < n {
		off += hdrSize + bodyLen(b[off:])
	}
	return off
}

// wakeWriter makes the writer goroutine run a batch, which writes rest and
// corked first; when the queue is full it has items to write anyway.
func (p *peer) wakeWriter() {
	p.queued.Add(1)
	select {
	case p.queue <- item{}:
	default:
		p.queued.Add(-1)
	}
}

// bodyLen is the body length in the header at the start of b.
func bodyLen(b []byte) int { return int(binary.LittleEndian.Uint32(b[4:hdrSize])) }
