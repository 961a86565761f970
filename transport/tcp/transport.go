package tcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Transport is one node's TCP transport. It implements transport.Transport.
type Transport struct {
	cfg       Config
	self      protocol.NodeID
	log       *slog.Logger
	ln        net.Listener
	tlsServer *tls.Config // nil: plain TCP

	// peers[id] is the outbound side of node id; nil: not a member. Set
	// once (under mu), read without locks on every Send.
	peers [protocol.MaxNodes]atomic.Pointer[peer]

	regions regionTable

	inMu    sync.Mutex
	inbound map[protocol.NodeID]*inConn   // the live connection each peer dialed
	polled  atomic.Pointer[[]*polledConn] // the inbound connections Poll consumes

	// corks counts the drains running; dirty lists the peers whose
	// messages wait in their corked buffer for a drain's end (cork.go).
	corks   atomic.Int32
	dirtyMu sync.Mutex
	dirty   []*peer // under dirtyMu
	// directMsgs and directWrites count the messages TrySend took and the
	// writes that sent them (tests read them: corking shares writes).
	directMsgs   atomic.Int64
	directWrites atomic.Int64

	ctx    context.Context // cancelled by Close: aborts dials and TLS handshakes
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	closed atomic.Bool

	mu       sync.Mutex
	isClosed bool                  // under mu: no new goroutines or connections
	conns    map[net.Conn]struct{} // every raw connection, so Close can break them
	wg       sync.WaitGroup

	closeOnce sync.Once
}

var _ transport.Transport = (*Transport)(nil)

// New starts a node's transport: it listens at cfg.Listen at once and
// starts connecting to every peer with an address.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("tcp: node %d listening at %s: %w", cfg.Self, cfg.Listen, err)
	}
	t := &Transport{
		cfg:     cfg,
		self:    cfg.Self,
		log:     cfg.Logger.With("node", int(cfg.Self)),
		ln:      ln,
		inbound: map[protocol.NodeID]*inConn{},
		done:    make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
	}
	t.regions.init()
	if cfg.TLS != nil {
		t.tlsServer = serverTLS(cfg.TLS)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(1)
	go t.acceptLoop()
	for id, addr := range cfg.Peers {
		if id != t.self {
			t.addPeer(id, addr)
		}
	}
	t.log.Info("tcp: listening", "addr", ln.Addr().String(), "tls", cfg.TLS != nil)
	return t, nil
}

// Self is this node.
func (t *Transport) Self() protocol.NodeID { return t.self }

// Addr is the address the transport listens at.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// SetPeerAddr sets (or changes) the address of node id, making it a member
// if it was not. The next connection attempt uses it; a live connection is
// kept. Tests that listen at port 0 start every node, then tell each the
// others' addresses.
func (t *Transport) SetPeerAddr(id protocol.NodeID, addr string) error {
	if id == t.self {
		return fmt.Errorf("tcp: node %d cannot be its own peer: %w", id, transport.ErrUnknownPeer)
	}
	p := t.addPeer(id, addr)
	if p == nil {
		return fmt.Errorf("tcp: setting the address of node %d: %w", id, transport.ErrClosed)
	}
	p.setAddr(addr)
	return nil
}

// addPeer makes node id a member and starts its connection loop; it
// returns the peer (existing or new), nil after Close.
func (t *Transport) addPeer(id protocol.NodeID, addr string) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosed {
		return nil
	}
	if p := t.peers[id].Load(); p != nil {
		return p
	}
	p := newPeer(t, id, addr)
	t.peers[id].Store(p)
	t.wg.Add(1)
	go p.run()
	return p
}

// peer returns the outbound side of a member node, nil otherwise.
func (t *Transport) peer(id protocol.NodeID) *peer {
	if id == t.self {
		return nil
	}
	return t.peers[id].Load()
}

// Send queues frame and payload to node to (see transport.Messenger).
func (t *Transport) Send(to protocol.NodeID, frame, payload []byte) error {
	if t.closed.Load() {
		return fmt.Errorf("tcp: send to node %d: %w", to, transport.ErrClosed)
	}
	if len(frame) != protocol.FrameSize || len(payload) > transport.MaxPayload {
		return fmt.Errorf("tcp: send to node %d: frame of %d bytes, payload of %d: %w",
			to, len(frame), len(payload), transport.ErrFrameSize)
	}
	p := t.peer(to)
	if p == nil {
		return fmt.Errorf("tcp: send to node %d: %w", to, transport.ErrUnknownPeer)
	}
	if p.down.Load() {
		return fmt.Errorf("tcp: send: %w", p.downErr())
	}
	bp := msgPool.Get().(*[]byte)
	b := appendHeader((*bp)[:0], kindMsg, len(frame)+len(payload))
	b = append(b, frame...)
	*bp = append(b, payload...)
	if err := p.enqueue(item{buf: *bp, pooled: bp}, nil); err != nil {
		return fmt.Errorf("tcp: send to node %d: %w", to, err)
	}
	return nil
}

// msgPool recycles the wire buffers of messages (header, frame, payload).
var msgPool = sync.Pool{New: func() any {
	b := make([]byte, 0, hdrSize+maxMsgBody)
	return &b
}}

// Close stops the transport: listener, connections and goroutines. It
// returns once they all exited; the handler is not called afterwards. It
// must not be called from the handler.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		t.mu.Lock()
		t.isClosed = true
		conns := t.conns
		t.conns = nil
		t.mu.Unlock()
		close(t.done)
		t.cancel()
		t.ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	t.wg.Wait()
	return nil
}

// track registers a raw connection so Close can break it; false (and the
// connection closed) after Close.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosed {
		c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

// untrack closes a raw connection and forgets it.
func (t *Transport) untrack(c net.Conn) {
	c.Close()
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// acceptLoop accepts connections until Close.
func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: say so, breathe, go on.
			t.log.Error("tcp: accepting a connection", "err", err)
			select {
			case <-t.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if !t.track(c) {
			return
		}
		t.wg.Add(1) // the accept loop's own count keeps the group above zero
		go t.serveInbound(c)
	}
}

// PeerDown reports why node id is down (unreachable for PeerTimeout, or
// refusing the handshake) or cannot be reached right now, or nil while it
// is connected.
func (t *Transport) PeerDown(id protocol.NodeID) error {
	p := t.peer(id)
	if p == nil {
		return nil
	}
	if p.down.Load() {
		return p.downErr()
	}
	if f := p.failing.Load(); f != nil {
		return fmt.Errorf("node %d unreachable for %v (%v): %w", id, time.Since(f.since).Round(time.Millisecond), f.err, transport.ErrPeerDown)
	}
	return nil
}
