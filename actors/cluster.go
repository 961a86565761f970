package actors

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// Sender is how a cluster node's messages leave the process: a transport,
// or hollywood's engine with our transport as its Remoter (Host).
type Sender interface {
	Send(to protocol.NodeID, frame, payload []byte) error
}

// TrySender is a Sender that can also send without waiting (the shared
// memory transport): the node sends straight from its own goroutine when the
// outbox is idle, saving a goroutine hand-off per message.
type TrySender interface {
	TrySend(to protocol.NodeID, frame, payload []byte) (bool, error)
}

// CorkSender is a TrySender that can also hold back a message that the
// handler of a frame it delivered sends, until it has handled the frames
// that came with that one, and write them together (tcp: one write per
// peer instead of one per message).
type CorkSender interface {
	TrySendCorked(to protocol.NodeID, frame, payload []byte) (bool, error)
}

// ClusterConfig adds what a node of a real cluster needs.
type ClusterConfig struct {
	Config
	// Logger receives errors (malformed frames, failed sends); nil: discard.
	Logger *slog.Logger
	// RequestTimeout bounds how long a worker waits for the protocol
	// (a reply from a peer) before the node reports the peer as down and
	// fails; default 10 s.
	RequestTimeout time.Duration
	// DownPeers, when set, names the peers the transport knows to be down
	// and why, for the error of a worker that waited too long.
	DownPeers func() error
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// NewClusterNode starts node cfg.ID of a cluster over store. Its messages
// go out through Connect's sender; the transport delivers incoming frames
// to Receive.
func NewClusterNode(cfg ClusterConfig, store storage.PageStore) (*Local, error) {
	l, err := newLocal(cfg.Config, store)
	if err != nil {
		return nil, err
	}
	if cfg.Logger != nil {
		l.log = cfg.Logger
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	l.out = newOutbox(l)
	go l.watchdog(cfg.RequestTimeout, cfg.DownPeers)
	return l, nil
}

// Connect sets where messages to other nodes go. Call it before the first
// worker runs.
func (l *Local) Connect(s Sender) { l.out.setSender(s) }

// Receive is the transport's handler: it decodes and checks one frame from
// node from and hands it to the node. Nothing a peer sends can crash the
// node: a malformed frame, a frame claiming another sender or for another
// node, or a payload of the wrong length is logged and dropped.
func (l *Local) Receive(from protocol.NodeID, frame, payload []byte) {
	l.receive(from, frame, payload, false)
}

// ReceiveInline is Receive called by the transport's own goroutine for
// the frames it consumes (actors.InlineFrames): what the handler sends may
// wait there for the frames that came with this one (CorkSender). No other
// caller may use it: its messages would wait on a batch it does not end.
func (l *Local) ReceiveInline(from protocol.NodeID, frame, payload []byte) {
	l.receive(from, frame, payload, true)
}

func (l *Local) receive(from protocol.NodeID, frame, payload []byte, inline bool) {
	m, err := protocol.Decode(frame)
	if err == nil {
		switch {
		case m.From != from:
			err = fmt.Errorf("frame from node %d claims to come from node %d", from, m.From)
		case m.To != l.node.ID():
			err = fmt.Errorf("frame from node %d is for node %d", from, m.To)
		case len(payload) != m.PayloadLen():
			err = fmt.Errorf("%v from node %d with a payload of %d bytes, want %d", m.Type, from, len(payload), m.PayloadLen())
		}
	}
	if err != nil {
		l.BadFrames.Add(1)
		l.log.Error("dropping a bad frame", "node", l.node.ID(), "from", from, "err", err)
		return
	}
	if l.partitioned.Load() {
		return // fault injection: the network lost it
	}
	if m.Type == protocol.TTxGate {
		l.onGate(&m) // the start gate, apart from the protocol (txstart.go)
		return
	}
	if t := l.trace; t != nil {
		t.received.Add(1)
		if m.Type == protocol.TRequest || m.Type == protocol.TTransfer {
			start := time.Now()
			defer func() { t.record(t.handler, time.Since(start)) }()
		}
	}
	l.mu.Lock()
	if !l.closed {
		// What the handler sends may wait for the transport's other
		// frames (CorkSender): this goroutine is the transport's.
		l.inFrame = inline
		if l.views.Load() {
			l.admit(&m, payload)
		} else {
			l.node.Deliver(&m, payload)
		}
		l.inFrame = false
	}
	l.mu.Unlock()
}

// ErrNoAnswer: a worker waited longer than the request timeout for the
// protocol, and the node failed (a peer is down, or stuck).
var ErrNoAnswer = errors.New("no answer from the cluster within the request timeout")

// watchdog fails the node when a worker is waiting in an operation that
// began longer ago than the bound: a peer that died with a request
// outstanding never answers, and the workers must see an error rather than
// hang.
func (l *Local) watchdog(bound time.Duration, down func() error) {
	t := time.NewTicker(min(bound/4, time.Second))
	defer t.Stop()
	for range t.C {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		for p := range l.parked {
			if waited := time.Since(p.since); waited > bound {
				l.log.Error("stuck", "node", l.node.ID(), "frames", l.node.DescribeStuck(8))
				why := error(nil)
				if down != nil {
					why = down()
				}
				if why != nil {
					l.fail(fmt.Errorf("actors: node %d: a worker waited %v for the protocol: %w: %w", l.node.ID(), waited.Round(time.Millisecond), ErrNoAnswer, why))
				} else {
					l.fail(fmt.Errorf("actors: node %d: a worker waited %v for the protocol (is a peer down?): %w", l.node.ID(), waited.Round(time.Millisecond), ErrNoAnswer))
				}
				break
			}
		}
		l.mu.Unlock()
	}
}

// maxOutbox bounds the messages waiting for the transport. The protocol
// keeps few messages in flight per page and worker, so reaching it means
// the transport is stuck: the node fails instead of growing without end.
const maxOutbox = 1 << 16

type outMsg struct {
	at    time.Time // when it was queued (traced nodes only)
	to    protocol.NodeID
	frame [protocol.FrameSize]byte
	buf   *[protocol.PageSize]byte // the payload's copy (pooled), nil if none
	n     int                      // payload length
}

func (m *outMsg) payload() []byte {
	if m.buf == nil {
		return nil
	}
	return m.buf[:m.n]
}

// outbox hands messages to the sender from a goroutine of its own, so the
// node never blocks on the network while holding its lock.
type outbox struct {
	l      *Local
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []outMsg
	sender Sender
	try    TrySender  // sender's non-blocking side, if it has one
	cork   CorkSender // its side for the handlers of its frames, if it has one
	busy   bool       // run is sending a batch (order: nothing may overtake it)
	closed bool
	// deliver: the close is a clean one, run hands what is queued to the
	// sender before it returns (else it drops it, as a crash would).
	deliver bool
	dropped int // queued messages a close without deliver dropped
	done    chan struct{}
	pool    sync.Pool
}

func newOutbox(l *Local) *outbox {
	o := &outbox{l: l, done: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	o.pool.New = func() any { return new([protocol.PageSize]byte) }
	go o.run()
	return o
}

func (o *outbox) setSender(s Sender) {
	o.mu.Lock()
	o.sender = s
	o.try, _ = s.(TrySender)
	o.cork, _ = s.(CorkSender)
	o.mu.Unlock()
	o.cond.Broadcast()
}

// add is called under the node's lock, so adds never run concurrently.
func (o *outbox) add(m *protocol.Message, payload []byte) {
	var om outMsg
	om.to = m.To
	if t := o.l.trace; t != nil {
		t.sent.Add(1)
	}
	protocol.Encode(om.frame[:], m)
	o.addFrame(&om, payload)
}

// addFrame queues an encoded message (under the node's lock).
func (o *outbox) addFrame(om *outMsg, payload []byte) {
	if o.l.retryTo.Has(om.to) && o.l.views.Load() {
		// Earlier messages to this peer wait for a retry: this one goes
		// behind them, or it would overtake them.
		o.l.queueRetry(om.to, om.frame[:], payload)
		return
	}
	if o.l.partitioned.Load() {
		o.sendFailed(om.to, om.frame[:], payload, errors.New("partitioned (fault injection)"))
		return
	}
	o.mu.Lock()
	direct := o.try != nil && len(o.queue) == 0 && !o.busy
	o.mu.Unlock()
	if direct {
		// Nothing is queued or being sent, and only adds queue: sending
		// now keeps every pair's order.
		var ok bool
		var err error
		if o.l.inFrame && o.cork != nil {
			ok, err = o.cork.TrySendCorked(om.to, om.frame[:], payload)
		} else {
			ok, err = o.try.TrySend(om.to, om.frame[:], payload)
		}
		if err != nil {
			o.sendFailed(om.to, om.frame[:], payload, err)
			return
		}
		if ok {
			return
		}
	}
	if len(payload) > 0 {
		om.buf = o.pool.Get().(*[protocol.PageSize]byte)
		om.n = copy(om.buf[:], payload)
	}
	if t := o.l.trace; t != nil {
		t.queued.Add(1)
		om.at = time.Now()
	}
	o.mu.Lock()
	full := len(o.queue) >= maxOutbox
	if !full {
		o.queue = append(o.queue, *om)
	}
	o.mu.Unlock()
	if full {
		o.l.fail(fmt.Errorf("actors: node %d: %d messages wait for the transport", o.l.node.ID(), maxOutbox))
		return
	}
	o.cond.Signal()
}

func (o *outbox) run() {
	defer close(o.done)
	var batch []outMsg
	for {
		o.mu.Lock()
		for (len(o.queue) == 0 || o.sender == nil) && !o.closed {
			o.cond.Wait()
		}
		if o.closed && (!o.deliver || len(o.queue) == 0 || o.sender == nil) {
			o.dropped = len(o.queue)
			o.mu.Unlock()
			return
		}
		batch, o.queue = o.queue, batch[:0]
		s := o.sender
		o.busy = true
		o.mu.Unlock()
		var failed protocol.NodeSet
		for i := range batch {
			m := &batch[i]
			if t := o.l.trace; t != nil {
				t.record(t.queue, time.Since(m.at))
			}
			var err error
			if failed.Has(m.to) {
				err = errors.New("an earlier message to the peer was refused") // wait behind it
			} else {
				err = s.Send(m.to, m.frame[:], m.payload())
			}
			if err != nil {
				failed.Add(m.to)
				o.l.mu.Lock()
				o.sendFailed(m.to, m.frame[:], m.payload(), err)
				o.l.mu.Unlock()
			}
			if m.buf != nil {
				o.pool.Put(m.buf)
				m.buf = nil
			}
		}
		o.mu.Lock()
		o.busy = false
		o.mu.Unlock()
	}
}

// sendFailed handles a message the transport could not take (under the
// node's lock). In a cluster with views, a message of the current view to
// a member is sent again a little later, in order with the peer's later
// messages (a restarted member's link comes up just after the view that
// has it: the view change's own messages must not be lost); a message to
// a node out of the view, or of an older view, is dropped (the view change
// aborted what it belonged to). Without views nothing would ever resolve
// it: the node fails.
func (o *outbox) sendFailed(to protocol.NodeID, frame, payload []byte, err error) {
	l := o.l
	if !l.views.Load() {
		l.fail(fmt.Errorf("actors: node %d: sending to node %d: %w", l.node.ID(), to, err))
		return
	}
	if l.vs.members.Has(to) && frameView(frame) == l.vs.number && !l.closed {
		l.queueRetry(to, frame, payload)
		return
	}
	l.DroppedSends.Add(1)
	if l.dropLogged.CompareAndSwap(false, true) {
		l.log.Warn("dropping messages to a node out of the view", "node", l.node.ID(), "peer", to, "view", l.vs.number)
	}
}

// frameView is the view number an encoded frame carries (codec.go).
func frameView(frame []byte) uint32 {
	return uint32(frame[25]) | uint32(frame[26])<<8 | uint32(frame[27])<<16
}

// retryEvery is how often messages the transport refused are offered again.
const retryEvery = 20 * time.Millisecond

// queueRetry keeps a refused message for retrySends (under the lock).
func (l *Local) queueRetry(to protocol.NodeID, frame, payload []byte) {
	if len(l.retry) >= maxOutbox {
		l.fail(fmt.Errorf("actors: node %d: %d messages wait for peers the transport cannot reach (view %d)", l.node.ID(), maxOutbox, l.vs.number))
		return
	}
	om := outMsg{to: to}
	copy(om.frame[:], frame)
	if len(payload) > 0 {
		om.buf = l.out.pool.Get().(*[protocol.PageSize]byte)
		om.n = copy(om.buf[:], payload)
	}
	l.retry = append(l.retry, om)
	l.retryTo.Add(to)
	if !l.retryArmed {
		l.retryArmed = true
		l.After(int64(retryEvery), l.retrySends)
	}
}

// retrySends offers the refused messages to the transport again, in order
// per peer; those of an older view or to a node out of the view are dropped.
func (l *Local) retrySends() {
	l.retryArmed = false
	msgs := l.retry
	l.retry, l.retryTo = nil, protocol.NodeSet{}
	for i := range msgs {
		m := &msgs[i]
		if frameView(m.frame[:]) == l.vs.number && l.vs.members.Has(m.to) {
			om := outMsg{to: m.to, frame: m.frame} // addFrame copies the payload into a buffer of its own
			l.out.addFrame(&om, m.payload())
		} else {
			l.DroppedSends.Add(1)
		}
		if m.buf != nil {
			l.out.pool.Put(m.buf)
			m.buf = nil
		}
	}
}

// close stops the outbox. With deliver (a clean close) the messages still
// queued go to the sender first: they are the node's last words, such as
// the answers to the evictions of peers that are leaving too, and the pages
// those pulled; a node that stops as soon as no peer holds its pages would
// otherwise drop the answer that let the last peer go, whenever run had not
// yet been scheduled to send it, and that peer would wait for it in vain.
// A transport that sends at once (TrySender: tcp, shm) mostly has nothing
// queued; one without (ibverbs) queues everything. Without deliver (a stop,
// a crash) what is queued is dropped; close returns how many.
func (o *outbox) close(deliver bool) (dropped int) {
	o.mu.Lock()
	o.closed = true
	o.deliver = deliver
	o.mu.Unlock()
	o.cond.Broadcast()
	<-o.done
	return o.dropped
}

// Stop ends a cluster node without flushing (its pages may be owned by
// peers that are gone): timers lapse, I/O drains, the outbox closes. Workers
// still waiting get an error.
func (l *Local) Stop() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.stopping = true // a stop is not a failure worth logging
	l.fail(errors.New("actors: node stopped"))
	l.halt(false)
}

// DescribeWaits reports the node's state for hang reports: whether it
// failed, and how long each waiting worker's operation has run.
func (l *Local) DescribeWaits() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("node %d: failed=%v closed=%v err=%v waiting:", l.node.ID(), l.failed.Load(), l.closed, l.err)
	for p := range l.parked {
		s += fmt.Sprintf(" %v", time.Since(p.since).Round(time.Millisecond))
	}
	return s
}

// Failed reports whether the node failed (its operations return the
// error that failed it).
func (l *Local) Failed() bool { return l.failed.Load() }
