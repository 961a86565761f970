//go:build linux

package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/transport"
)

// link is one live connection to a peer: the mapped segment and the
// bootstrap socket kept open as the liveness channel.
//
// Who touches the segment, and how teardown stays safe: senders write
// msgOut under its mutex; the reader goroutine reads msgIn and writes
// respOut (under respOut's mutex); the holder of respToken reads respIn;
// fail wakes the parked waiters. The reader unmaps the segment at its exit,
// after fail completed, with respToken and both producer mutexes held, and
// everyone else checks dead after taking the token or a mutex.
type link struct {
	t    *Transport
	peer *peer
	// lastActivity is the workers' activity count the reader saw last
	// (nap.go): only the reader goroutine touches it.
	lastActivity uint64
	conn         *net.UnixConn
	seg          *segment

	msgOut producer // messages and verb requests to the peer
	// msgIn holds messages and verb requests from the peer. Whoever holds
	// inMu consumes it: the reader goroutine, or a caller of
	// Transport.Poll (a worker that polls instead of waiting for the
	// reader to be scheduled).
	msgIn     consumer
	inMu      sync.Mutex
	respOut   producer      // answers to the peer's verbs, written by the reader
	respIn    consumer      // answers to our verbs, drained by the respToken holder
	respToken chan struct{} // one token: the right to consume respIn

	dead     atomic.Bool
	reason   error         // why it failed; written before dead is set
	deadCh   chan struct{} // closed when fail has finished
	failOnce sync.Once

	callMu sync.Mutex
	calls  map[uint64]*call // verbs waiting for an answer; nil once failed
	nextID uint64

	// The peer's regions mapped here (direct.go): read by direct verbs
	// under remoteMu's read lock, replaced under its lock.
	remoteMu sync.RWMutex
	remote   atomic.Pointer[map[uint32][]byte]
	sockMu   sync.Mutex // serializes region messages on conn
}

func (t *Transport) newLink(p *peer, conn *net.UnixConn, seg *segment, dialer bool) *link {
	msgOut, msgIn, respOut, respIn := ringMsgA, ringMsgB, ringRespA, ringRespB
	if !dialer {
		msgOut, msgIn, respOut, respIn = ringMsgB, ringMsgA, ringRespB, ringRespA
	}
	l := &link{
		t: t, peer: p, conn: conn, seg: seg,
		respToken: make(chan struct{}, 1),
		deadCh:    make(chan struct{}),
		calls:     map[uint64]*call{},
	}
	l.msgOut.init(newRing(seg.ctl(msgOut), seg.data(msgOut)), t.cfg.Spin, t.cfg.PeerTimeout, l.err)
	l.respOut.init(newRing(seg.ctl(respOut), seg.data(respOut)), t.cfg.Spin, t.cfg.PeerTimeout, l.err)
	// Both consumers compare their CPU with the peer's reader's, which it
	// publishes in the ring it consumes (our msgOut). Only our reader
	// publishes where the peer looks; a verb caller's CPU goes to respIn's
	// block, which nobody reads.
	peerCPU := &seg.ctl(msgOut).consCPU
	l.msgIn = consumer{ring: newRing(seg.ctl(msgIn), seg.data(msgIn)), kinds: 1<<kindMsg | 1<<kindVerbReq,
		spin: newSpinner(t.cfg.Spin), ownCPU: &seg.ctl(msgIn).consCPU, peerCPU: peerCPU}
	l.respIn = consumer{ring: newRing(seg.ctl(respIn), seg.data(respIn)), kinds: 1 << kindVerbResp,
		spin: newSpinner(t.cfg.Spin), ownCPU: &seg.ctl(respIn).consCPU, peerCPU: peerCPU}
	l.respToken <- struct{}{}
	return l
}

// send puts a record into msgOut; a corrupt ring fails the link.
func (l *link) send(kind byte, frame, payload []byte) error {
	err := l.msgOut.put(kind, frame, payload)
	if errors.Is(err, errCorrupt) {
		l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
	}
	return err
}

// err is nil while the link is usable, else why it is not.
func (l *link) err() error {
	if !l.dead.Load() {
		return nil
	}
	return l.reason
}

// fail marks the link dead (once): it wakes this side's parked waiters,
// closes the socket (the peer reads EOF and fails its side), fails the
// verbs waiting for answers and detaches the link from its peer.
func (l *link) fail(reason error) {
	l.failOnce.Do(func() {
		l.reason = reason
		l.dead.Store(true)
		// Waiters set their flag and then check dead; we set dead and then
		// check the flag: one of us sees the other (see wait.go).
		wake(&l.msgIn.ctl.consWaiting)
		wake(&l.respIn.ctl.consWaiting)
		wake(&l.msgOut.ctl.prodWaiting)
		wake(&l.respOut.ctl.prodWaiting)
		l.conn.Close()
		l.callMu.Lock()
		calls := l.calls
		l.calls = nil
		l.callMu.Unlock()
		for _, c := range calls {
			c.finish(stFailed, 0)
		}
		l.t.detach(l, reason)
		close(l.deadCh)
		if errors.Is(reason, transport.ErrClosed) {
			l.t.log.Debug("shm: link closed", "peer", l.peer.id)
		} else {
			l.t.log.Warn("shm: link down", "peer", l.peer.id, "err", reason)
		}
	})
}

// destroy releases a link that was never installed.
func (l *link) destroy() {
	l.conn.Close()
	l.seg.unmap()
}

// teardown unmaps the segment once nobody can touch it (see link).
func (l *link) teardown() {
	<-l.deadCh
	l.unmapRemote()
	<-l.respToken // kept: later verb callers find their call failed
	l.inMu.Lock() // kept: a poller finds the link dead
	l.msgOut.mu.Lock()
	l.respOut.mu.Lock()
	l.seg.unmap()
	l.respOut.mu.Unlock()
	l.msgOut.mu.Unlock()
}

// readLoop is the link's reader: it hands messages to the handler in order
// and serves the peer's verb requests, until the link fails. Pollers
// (Transport.Poll) consume the same ring between its turns, under inMu.
func (l *link) readLoop() {
	defer l.t.wg.Done()
	defer l.teardown()
	defer l.drainLeft()
	stopped := func() bool { return l.dead.Load() }
	for !l.dead.Load() {
		l.inMu.Lock()
		n, ok := l.drainIn(readBatch)
		l.inMu.Unlock()
		if !ok {
			return
		}
		if n == 0 {
			if act, ok := l.t.napping(); ok {
				// Workers poll: nap instead of parking while they make
				// progress (nap.go).
				if a := act.Load(); a != l.lastActivity {
					l.lastActivity = a
					if !l.msgIn.spinOnly(stopped) {
						l.t.nap()
					}
					continue
				}
			}
			if l.msgIn.wait(stopped) {
				l.drainStale() // idle: a good time
			}
		}
	}
}

// drainLeft hands the handler the messages the peer wrote before the link
// failed. A peer that stops cleanly writes its last messages (the replies
// of its shutdown: the pages it took back) and closes its socket at once;
// the socket's EOF must not lose what the ring already holds, as a TCP
// connection's close loses none of the bytes sent before it. A record the
// ring does not hold whole (a peer killed mid-write) ends it; verb
// requests are not served (nobody waits for their answer).
func (l *link) drainLeft() {
	handler := l.t.cfg.Handler
	l.inMu.Lock()
	defer l.inMu.Unlock()
	for range maxLeft {
		kind, frame, payload, n, err := l.msgIn.next()
		if err != nil || n == 0 {
			return
		}
		if kind == kindMsg {
			handler(l.peer.id, frame, payload)
		}
		l.msgIn.release(n)
	}
}

// maxLeft bounds drainLeft: more records than a ring can hold.
const maxLeft = 1 << 20

// readBatch bounds the records one turn of the reader or a poller consumes
// before it lets the other have the ring.
const readBatch = 64

// drainIn consumes up to max records of msgIn: messages go to the handler,
// verb requests are served. The caller holds inMu. It returns how many it
// consumed, and false once the link failed.
func (l *link) drainIn(max int) (int, bool) {
	handler := l.t.cfg.Handler
	for i := range max {
		if l.dead.Load() {
			return i, false
		}
		kind, frame, payload, n, err := l.msgIn.next()
		if err != nil {
			l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
			return i, false
		}
		if n == 0 {
			return i, true
		}
		switch kind {
		case kindMsg:
			handler(l.peer.id, frame, payload)
		case kindVerbReq:
			if err := l.serve(frame, payload); err != nil {
				l.fail(fmt.Errorf("%w: node %d: answering a verb: %v", transport.ErrPeerDown, l.peer.id, err))
				return i, false
			}
		}
		l.msgIn.release(n)
	}
	return max, true
}

// watch reads the bootstrap socket, which after the handshake carries
// only the peer's region messages (direct.go): EOF means the peer process
// exited or closed its transport.
func (l *link) watch() {
	defer l.t.wg.Done()
	var err error
	for {
		key, size, fd, why, rerr := l.readRegionMsg()
		if rerr != nil {
			err = rerr
			break
		}
		if why == nil {
			why = l.mapRemote(key, size, fd)
		}
		if why != nil {
			l.t.log.Warn("shm: ignored a region the peer passed; its verbs take the ring", "peer", l.peer.id, "err", why)
		}
	}
	if l.dead.Load() {
		return
	}
	switch {
	case errors.Is(err, io.EOF):
		err = errors.New("bootstrap socket closed (the process exited or closed its transport)")
	}
	l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
}
