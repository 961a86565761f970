//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"golang.org/x/sys/unix"
)

// maxHandshakes bounds the bootstrap connections being vetted at once, so a
// flood of connections cannot grow goroutines without bound.
const maxHandshakes = 32

// Transport is one node's shared-memory transport. It is safe for
// concurrent use.
type Transport struct {
	cfg   Config
	self  protocol.NodeID
	log   *slog.Logger
	ln    *net.UnixListener
	peers [256]*peer // nil: not a member (or self)
	// members are the non-nil peers, for Poll.
	members []*peer

	closed atomic.Bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	hsSem  chan struct{} // handshake slots

	connMu sync.Mutex
	conns  map[*net.UnixConn]struct{} // bootstrap sockets mid-handshake; Close closes them

	regMu   sync.RWMutex
	regions map[uint32][]byte // registered memory by key
	allocs  []*allocation     // AllocMemory's memory, unmapped by Close
	exports []exported        // registered allocations: passed to every peer

	// Napping readers (nap.go).
	activity      atomic.Pointer[atomic.Uint64]
	parkedWorkers atomic.Int32
	napWord       atomic.Uint32
	naps          atomic.Uint64 // naps taken (tests)
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Allocator = (*Transport)(nil)
)

// peer is the state of one other node.
type peer struct {
	id   protocol.NodeID
	path string
	live atomic.Pointer[link] // the current link, for Send's fast path

	mu      sync.Mutex
	cur     *link         // same as live, changed under mu
	everUp  bool          // a link was up once: a missing link means down, not "not yet"
	lastErr error         // why the last link failed
	changed chan struct{} // closed and replaced on every change of cur
}

// New listens at cfg.SocketPath and starts connecting: eagerly, in the
// background, with retries and exponential backoff, so nodes may start in
// any order. The node with the lower id dials (and creates the pair's
// segment); the other accepts. A Send to a peer that has not connected yet
// waits for it up to Config.PeerTimeout.
func New(cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var probe uint16 = 1
	if *(*byte)(unsafe.Pointer(&probe)) != 1 {
		// The atomics act on little-endian words (transport.OneSided).
		return nil, errors.New("shm: needs a little-endian machine")
	}
	ln, err := listenUnix(cfg.SocketPath)
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:     cfg,
		self:    cfg.Self,
		log:     cfg.Logger.With("node", cfg.Self),
		ln:      ln,
		done:    make(chan struct{}),
		hsSem:   make(chan struct{}, maxHandshakes),
		conns:   map[*net.UnixConn]struct{}{},
		regions: map[uint32][]byte{},
	}
	for id, path := range cfg.Peers {
		if id != cfg.Self {
			t.peers[id] = &peer{id: id, path: path, changed: make(chan struct{})}
			t.members = append(t.members, t.peers[id])
		}
	}
	t.wg.Add(1)
	go t.acceptLoop()
	for _, p := range t.peers {
		if p != nil && p.id > t.self {
			t.wg.Add(1)
			go t.dialLoop(p)
		}
	}
	return t, nil
}

// listenUnix listens at path, replacing a stale socket file (one nobody
// accepts on) but never a live one.
func listenUnix(path string) (*net.UnixListener, error) {
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	ln, err := net.ListenUnix("unix", addr)
	if err == nil {
		return ln, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("shm: listening at %s: %w", path, err)
	}
	c, derr := net.DialTimeout("unix", path, time.Second)
	if derr == nil {
		c.Close()
		return nil, fmt.Errorf("shm: listening at %s: a live process listens there", path)
	}
	if fi, serr := os.Lstat(path); serr != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("shm: listening at %s: %w (and it is not a stale socket)", path, err)
	}
	if rerr := os.Remove(path); rerr != nil {
		return nil, fmt.Errorf("shm: removing stale socket %s: %w", path, rerr)
	}
	ln, err = net.ListenUnix("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("shm: listening at %s: %w", path, err)
	}
	return ln, nil
}

// Self is this node.
func (t *Transport) Self() protocol.NodeID { return t.self }

// Addr is the socket path this node listens at.
func (t *Transport) Addr() string { return t.cfg.SocketPath }

// Send copies frame and payload into the ring to node to. It waits (spin,
// then park) while the ring is full, at most Config.PeerTimeout.
func (t *Transport) Send(to protocol.NodeID, frame, payload []byte) error {
	if len(frame) != protocol.FrameSize {
		return fmt.Errorf("shm: frame of %d bytes, want %d: %w", len(frame), protocol.FrameSize, transport.ErrFrameSize)
	}
	if len(payload) > transport.MaxPayload {
		return fmt.Errorf("shm: payload of %d bytes, at most %d: %w", len(payload), transport.MaxPayload, transport.ErrFrameSize)
	}
	l, err := t.linkTo(to)
	if err != nil {
		return err
	}
	if err := l.send(kindMsg, frame, payload); err != nil {
		return t.linkErr(l, "send", err)
	}
	return nil
}

// TrySend is Send that never waits: it reports false (and sends nothing)
// when the link to the peer is not up or its ring has no room now. A caller
// that must not block (the node runtime holding its lock) tries it first
// and queues the message for a goroutine otherwise.
func (t *Transport) TrySend(to protocol.NodeID, frame, payload []byte) (bool, error) {
	if len(frame) != protocol.FrameSize {
		return false, fmt.Errorf("shm: frame of %d bytes, want %d: %w", len(frame), protocol.FrameSize, transport.ErrFrameSize)
	}
	if len(payload) > transport.MaxPayload {
		return false, fmt.Errorf("shm: payload of %d bytes, at most %d: %w", len(payload), transport.MaxPayload, transport.ErrFrameSize)
	}
	if t.closed.Load() {
		return false, fmt.Errorf("shm: node %d: %w", t.self, transport.ErrClosed)
	}
	p := t.peers[to]
	if p == nil {
		return false, fmt.Errorf("shm: node %d is not a peer of node %d: %w", to, t.self, transport.ErrUnknownPeer)
	}
	l := p.live.Load()
	if l == nil || l.dead.Load() {
		return false, nil
	}
	ok, err := l.msgOut.tryPut(kindMsg, frame, payload)
	if errors.Is(err, errCorrupt) {
		l.fail(fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, l.peer.id, err))
	}
	if err != nil {
		return false, t.linkErr(l, "send", err)
	}
	return ok, nil
}

// Poll consumes what the peers have sent and this node's readers have not
// taken yet, calling the handler (and serving verb requests) on the
// caller's goroutine, and returns how many records it consumed. It never
// waits: a link whose reader is consuming is skipped. A worker that waits
// for a reply polls instead of waiting for a reader goroutine to be
// scheduled, which on a machine with few cores is most of a round trip.
// The caller must not hold anything the handler takes.
func (t *Transport) Poll() int {
	n := 0
	for _, p := range t.members {
		l := p.live.Load()
		if l == nil || l.dead.Load() || !l.inMu.TryLock() {
			continue
		}
		got, _ := l.drainIn(readBatch)
		l.inMu.Unlock()
		n += got
	}
	return n
}

// linkTo returns the live link to node to, waiting for the first connection
// up to PeerTimeout.
func (t *Transport) linkTo(to protocol.NodeID) (*link, error) {
	if t.closed.Load() {
		return nil, fmt.Errorf("shm: node %d: %w", t.self, transport.ErrClosed)
	}
	p := t.peers[to]
	if p == nil {
		return nil, fmt.Errorf("shm: node %d is not a peer of node %d: %w", to, t.self, transport.ErrUnknownPeer)
	}
	if l := p.live.Load(); l != nil && !l.dead.Load() {
		return l, nil
	}
	var timeout <-chan time.Time
	for {
		p.mu.Lock()
		l, up, last, changed := p.cur, p.everUp, p.lastErr, p.changed
		p.mu.Unlock()
		switch {
		case t.closed.Load():
			return nil, fmt.Errorf("shm: node %d: %w", t.self, transport.ErrClosed)
		case l != nil && !l.dead.Load():
			return l, nil
		case l == nil && up:
			// It was connected and failed: report it now rather than
			// stalling callers until a reconnection that may never come.
			if last == nil {
				last = fmt.Errorf("%w: node %d", transport.ErrPeerDown, to)
			}
			return nil, fmt.Errorf("shm: %w", last)
		}
		if timeout == nil {
			timer := time.NewTimer(t.cfg.PeerTimeout)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-changed:
		case <-t.done:
		case <-timeout:
			return nil, fmt.Errorf("shm: node %d not connected after %v (socket %s): %w", to, t.cfg.PeerTimeout, p.path, transport.ErrPeerDown)
		}
	}
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// linkErr gives an error from a link operation its context; after Close it
// is ErrClosed whatever the link said.
func (t *Transport) linkErr(l *link, what string, err error) error {
	if t.closed.Load() && !errors.Is(err, transport.ErrClosed) {
		return fmt.Errorf("shm: %s to node %d: %w (%v)", what, l.peer.id, transport.ErrClosed, err)
	}
	return fmt.Errorf("shm: %s to node %d: %w", what, l.peer.id, err)
}

// Close stops the transport: it closes the listener and every link, wakes
// every waiter, and returns once every goroutine exited and every segment is
// unmapped. Later calls fail with ErrClosed. It must not be called from the
// handler.
func (t *Transport) Close() error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(t.done)
	err := t.ln.Close()
	t.connMu.Lock()
	for c := range t.conns {
		c.Close() // aborts handshakes in progress
	}
	t.connMu.Unlock()
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		l := p.cur
		p.mu.Unlock()
		if l != nil {
			l.fail(fmt.Errorf("shm: node %d: %w", t.self, transport.ErrClosed))
		}
	}
	t.wg.Wait()
	t.regMu.Lock()
	for _, a := range t.allocs {
		unix.Munmap(a.mem)
		unix.Close(a.fd)
	}
	t.allocs, t.exports = nil, nil
	t.regMu.Unlock()
	if err != nil {
		return fmt.Errorf("shm: closing the listener: %w", err)
	}
	return nil
}

// track registers a bootstrap socket mid-handshake so Close can abort it;
// false if the transport is closed already.
func (t *Transport) track(c *net.UnixConn) bool {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c *net.UnixConn) {
	t.connMu.Lock()
	delete(t.conns, c)
	t.connMu.Unlock()
}

// install makes l the link to its peer and starts its goroutines; false
// (and l destroyed) if the transport closed meanwhile. A previous link is
// failed: the peer reconnected, so the old one is dead on its side.
func (t *Transport) install(l *link) bool {
	p := l.peer
	p.mu.Lock()
	if t.closed.Load() {
		p.mu.Unlock()
		l.destroy()
		return false
	}
	old := p.cur
	p.cur, p.everUp, p.lastErr = l, true, nil
	p.live.Store(l)
	close(p.changed)
	p.changed = make(chan struct{})
	t.wg.Add(2)
	go l.readLoop()
	go l.watch()
	p.mu.Unlock()
	t.offerAll(l) // after cur is set: a region registered meanwhile reaches l one way or both
	if old != nil {
		old.fail(fmt.Errorf("%w: node %d reconnected", transport.ErrPeerDown, p.id))
	}
	t.log.Info("shm: connected", "peer", p.id)
	return true
}

// detach removes a failed link from its peer.
func (t *Transport) detach(l *link, reason error) {
	p := l.peer
	p.mu.Lock()
	if p.cur == l {
		p.cur, p.lastErr = nil, reason
		p.live.Store(nil)
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
}

// dialLoop keeps a link to a peer with a higher id: dial, handshake, wait
// for the link to fail, repeat; with backoff while the peer is unreachable.
func (t *Transport) dialLoop(p *peer) {
	defer t.wg.Done()
	backoff := t.cfg.BackoffMin
	var lastMsg string
	var lastAt time.Time
	for !t.closed.Load() {
		l, err := t.dial(p)
		if err == nil {
			if !t.install(l) {
				return
			}
			backoff = t.cfg.BackoffMin
			select {
			case <-l.deadCh:
				continue
			case <-t.done:
				return
			}
		}
		if t.closed.Load() {
			return
		}
		// A peer that is not up yet is normal (nodes start in any order):
		// debug level. A refused handshake is a configuration error: log
		// it, but not on every retry.
		if errors.Is(err, errHandshake) {
			if msg := err.Error(); msg != lastMsg || time.Since(lastAt) > 10*time.Second {
				t.log.Error("shm: connecting failed", "peer", p.id, "err", err)
				lastMsg, lastAt = msg, time.Now()
			}
		} else {
			t.log.Debug("shm: peer not reachable yet", "peer", p.id, "err", err)
		}
		select {
		case <-time.After(backoff):
		case <-t.done:
			return
		}
		backoff = min(2*backoff, t.cfg.BackoffMax)
	}
}

// dial connects to p, creates the pair's segment, passes it with the hello
// and waits for the welcome.
func (t *Transport) dial(p *peer) (_ *link, err error) {
	d := net.Dialer{Timeout: t.cfg.HandshakeTimeout}
	c, err := d.Dial("unix", p.path)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	if !t.track(conn) {
		conn.Close()
		return nil, transport.ErrClosed
	}
	defer t.untrack(conn)
	var seg *segment
	defer func() {
		if err != nil {
			conn.Close()
			if seg != nil {
				seg.unmap()
			}
		}
	}()
	deadline := time.Now().Add(t.cfg.HandshakeTimeout)
	ringSize := uint64(t.cfg.RingSize)
	fd, seg, err := createSegment(fmt.Sprintf("scalestore-shm-%d-%d", t.self, p.id), ringSize)
	if err != nil {
		return nil, fmt.Errorf("shm: segment for node %d: %w", p.id, err)
	}
	seg.writeHeader(t.cfg.ClusterID, uint8(t.self), uint8(p.id))
	h := hello{kind: msgHello, version: protoVersion, cluster: t.cfg.ClusterID, from: t.self, to: p.id, ringSize: ringSize}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		unix.Close(fd)
		return nil, err
	}
	_, _, err = conn.WriteMsgUnix(h.encode(), unix.UnixRights(fd), nil)
	unix.Close(fd) // the peer holds its own reference now; our mapping keeps the memory
	if err != nil {
		return nil, fmt.Errorf("shm: sending hello to node %d: %w", p.id, err)
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	b := make([]byte, helloSize)
	if _, err := io.ReadFull(conn, b); err != nil {
		return nil, fmt.Errorf("%w: node %d at %s did not answer: %v", errHandshake, p.id, p.path, err)
	}
	r, err := decodeHello(b)
	if err != nil {
		return nil, err
	}
	if r.kind == msgReject {
		why := rejectText[r.reason]
		if why == "" {
			why = fmt.Sprintf("reason %d", r.reason)
		}
		return nil, fmt.Errorf("%w: node %d at %s refused us: %s", errHandshake, p.id, p.path, why)
	}
	if r.kind != msgWelcome || r.version != protoVersion || r.cluster != t.cfg.ClusterID || r.from != p.id || r.to != t.self {
		return nil, fmt.Errorf("%w: unexpected answer from %s: kind %d version %d cluster %#x from node %d to node %d",
			errHandshake, p.path, r.kind, r.version, r.cluster, r.from, r.to)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return t.newLink(p, conn, seg, true), nil
}

// acceptLoop hands each bootstrap connection to a handshake goroutine, at
// most maxHandshakes at once.
func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		conn, err := t.ln.AcceptUnix()
		if err != nil {
			if t.closed.Load() {
				return
			}
			t.log.Warn("shm: accept failed", "err", err)
			select {
			case <-time.After(10 * time.Millisecond): // e.g. out of fds: do not spin
			case <-t.done:
				return
			}
			continue
		}
		select {
		case t.hsSem <- struct{}{}:
		default:
			t.log.Warn("shm: too many handshakes in progress; dropped a connection")
			conn.Close()
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer func() { <-t.hsSem }()
			t.accept(conn)
		}()
	}
}

// accept vets one bootstrap connection: the hello and its memfd. Anything
// wrong is logged and the connection closed (with a reject message when the
// sender speaks our protocol); the transport carries on.
func (t *Transport) accept(conn *net.UnixConn) {
	if !t.track(conn) {
		conn.Close()
		return
	}
	defer t.untrack(conn)
	deadline := time.Now().Add(t.cfg.HandshakeTimeout)
	refuse := func(reason uint32, err error) {
		t.log.Error("shm: refused a bootstrap connection", "err", err)
		if reason != 0 {
			r := hello{kind: msgReject, version: protoVersion, cluster: t.cfg.ClusterID, from: t.self, reason: reason}
			_ = writeAll(conn, r.encode(), deadline) // best effort: the dialer learns why
		}
		conn.Close()
	}
	b, fds, err := readHello(conn, deadline)
	if err != nil {
		refuse(0, err)
		return
	}
	h, err := decodeHello(b)
	if err != nil {
		closeAll(fds)
		refuse(0, err)
		return
	}
	p, reason, err := t.checkHello(h)
	if err == nil && len(fds) != 1 {
		err = fmt.Errorf("%w: hello carried %d fds, want exactly one memfd", errHandshake, len(fds))
	}
	if err != nil {
		closeAll(fds)
		refuse(reason, err)
		return
	}
	fd := fds[0]
	if err := checkSegment(fd, h.ringSize); err != nil {
		unix.Close(fd)
		refuse(rejectSegment, fmt.Errorf("%w: from node %d: %v", errHandshake, h.from, err))
		return
	}
	seg, err := mapSegment(fd, h.ringSize)
	unix.Close(fd) // the mapping keeps the memory
	if err == nil {
		if err = seg.checkFresh(h.cluster, uint8(h.from), uint8(t.self)); err != nil {
			seg.unmap()
		}
	}
	if err != nil {
		refuse(rejectSegment, fmt.Errorf("%w: segment from node %d: %v", errHandshake, h.from, err))
		return
	}
	w := hello{kind: msgWelcome, version: protoVersion, cluster: t.cfg.ClusterID, from: t.self, to: h.from, ringSize: h.ringSize}
	if err := writeAll(conn, w.encode(), deadline); err != nil {
		seg.unmap()
		refuse(0, fmt.Errorf("%w: answering node %d: %v", errHandshake, h.from, err))
		return
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		seg.unmap()
		refuse(0, err)
		return
	}
	t.install(t.newLink(p, conn, seg, false))
}

// checkHello validates a hello's fields against our configuration.
func (t *Transport) checkHello(h hello) (*peer, uint32, error) {
	bad := func(reason uint32, format string, args ...any) (*peer, uint32, error) {
		return nil, reason, fmt.Errorf("%w: %s", errHandshake, fmt.Sprintf(format, args...))
	}
	switch {
	case h.kind != msgHello:
		return bad(0, "message kind %d, want a hello", h.kind)
	case h.version != protoVersion:
		return bad(rejectVersion, "protocol version %d, want %d", h.version, protoVersion)
	case h.cluster != t.cfg.ClusterID:
		return bad(rejectCluster, "cluster id %#x, want %#x", h.cluster, t.cfg.ClusterID)
	case h.to != t.self:
		return bad(rejectNotMe, "hello for node %d reached node %d", h.to, t.self)
	case t.peers[h.from] == nil:
		return bad(rejectUnknownPeer, "node %d is not a member", h.from)
	case h.from > t.self:
		return bad(rejectDirection, "node %d dialed node %d; the lower id dials", h.from, t.self)
	case !validRingSize(h.ringSize):
		return bad(rejectRingSize, "ring size %d", h.ringSize)
	}
	return t.peers[h.from], 0, nil
}

// le64 and friends keep the verb codec short.
var le = binary.LittleEndian
