package tcp

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

// inConn is the live connection a peer dialed to us.
type inConn struct {
	raw    net.Conn
	done   chan struct{} // closed when its receive loop has exited
	polled *polledConn   // plain TCP: consumed by pollers too
}

// serveInbound runs one accepted connection: handshake, then the receive
// loop that hands messages to the handler and serves verbs.
func (t *Transport) serveInbound(raw net.Conn) {
	defer t.wg.Done()
	defer t.untrack(raw)
	remote := raw.RemoteAddr().String()
	conn, from, ok := t.acceptHandshake(raw, remote)
	if !ok {
		return
	}
	// One receive loop per peer: a reconnecting peer's new connection
	// replaces the old one, which must have stopped calling the handler
	// before the new one starts, or its messages could overtake. Only then
	// is the handshake accepted, so a peer whose old loop is stuck in the
	// handler sees its new connection time out, and counts it down.
	if p := t.peer(from); p != nil && (p.down.Load() || p.failing.Load() != nil) {
		// The peer is evidently back (it dialed us): queue for it again
		// and redial it now rather than after the backoff (up to
		// BackoffMax), or the answers to what it is about to ask would
		// fail at once or wait.
		p.down.Store(false)
		select {
		case p.addrChanged <- struct{}{}:
		default:
		}
	}
	ic := &inConn{raw: raw, done: make(chan struct{})}
	t.inMu.Lock()
	old := t.inbound[from]
	t.inbound[from] = ic
	t.inMu.Unlock()
	if old != nil {
		old.raw.Close()
		// Free the descriptor (and tell the dialer) if the wait is long;
		// the chain of waits stays, so no two loops of a peer overlap.
		tm := time.AfterFunc(t.cfg.HandshakeTimeout, func() { raw.Close() })
		<-old.done
		tm.Stop()
	}
	_, err := conn.Write(encodeAnswer(reasonOK, t.self))
	if err == nil {
		raw.SetDeadline(time.Time{})
		if pc := t.pollable(conn, from); pc != nil {
			t.inMu.Lock()
			if t.inbound[from] == ic {
				ic.polled = pc
				t.setPolledLocked()
			}
			t.inMu.Unlock()
			err = t.receivePolled(pc)
		} else {
			err = t.receive(conn, from)
		}
	} else if !t.closed.Load() {
		t.log.Warn("tcp: could not accept a peer's connection: its previous one was busy in the handler",
			"peer", int(from), "remote", remote, "err", err)
		err = net.ErrClosed
	}
	t.inMu.Lock()
	if t.inbound[from] == ic {
		delete(t.inbound, from)
		t.setPolledLocked()
	}
	t.inMu.Unlock()
	close(ic.done)

	log := t.log.With("peer", int(from), "remote", remote)
	switch {
	case t.closed.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		log.Debug("tcp: inbound connection closed", "err", err)
	case errors.Is(err, errMalformed):
		log.Error("tcp: malformed frame, closing connection", "err", err)
	default:
		log.Warn("tcp: inbound connection failed", "err", err)
	}
}

// acceptHandshake reads and checks a hello within HandshakeTimeout. It logs
// every refusal, naming the remote address and the reason, and answers it
// with the reason code when it can; an accepted hello is answered by the
// caller.
func (t *Transport) acceptHandshake(raw net.Conn, remote string) (net.Conn, protocol.NodeID, bool) {
	raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	conn := raw
	if t.tlsServer != nil {
		tc := tls.Server(raw, t.tlsServer)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			if !t.closed.Load() {
				t.log.Error("tcp: TLS handshake failed, closing connection", "remote", remote, "err", err)
			}
			return nil, 0, false
		}
		conn = tc
	}
	reject := func(r reason, args ...any) (net.Conn, protocol.NodeID, bool) {
		if t.closed.Load() {
			return nil, 0, false
		}
		t.log.Error("tcp: rejected incoming connection", append([]any{"remote", remote, "reason", r.String()}, args...)...)
		conn.Write(encodeAnswer(r, t.self)) // best effort: the dialer logs the reason too
		return nil, 0, false
	}
	// The magic first, so garbage shorter than a hello is refused at once.
	var b [helloSize]byte
	n, err := io.ReadFull(conn, b[:len(magic)])
	if err == nil {
		var m int
		if [8]byte(b[:8]) == magic {
			m, err = io.ReadFull(conn, b[len(magic):])
		}
		n += m
	}
	if m := min(n, len(magic)); err != nil && bytes.Equal(b[:m], magic[:m]) {
		why := "incomplete handshake"
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			why = fmt.Sprintf("no handshake within %v", t.cfg.HandshakeTimeout)
		}
		if t.closed.Load() {
			return nil, 0, false
		}
		t.log.Error("tcp: rejected incoming connection", "remote", remote, "reason", why, "bytes", n, "err", err)
		return nil, 0, false
	}
	h, r := decodeHello(b[:])
	if r == reasonOK {
		r = t.admit(h)
	}
	if r != reasonOK {
		args := []any{"node", h.from, "target", h.to}
		switch r {
		case reasonBadMagic:
			args = []any{"first_bytes", string(b[:min(n, len(magic))])}
		case reasonCluster:
			args = append(args, "cluster", h.cluster, "want_cluster", t.cfg.ClusterID)
		case reasonVersion:
			args = append(args, "version", h.version, "want_version", version)
		}
		return reject(r, args...)
	}
	return conn, protocol.NodeID(h.from), true // answered by serveInbound
}

// admit checks a well-formed hello against the configuration.
func (t *Transport) admit(h hello) reason {
	switch {
	case t.closed.Load():
		return reasonShutdown
	case h.cluster != t.cfg.ClusterID:
		return reasonCluster
	case h.from == uint16(t.self):
		return reasonSelf
	case t.peer(protocol.NodeID(h.from)) == nil:
		return reasonNotPeer
	case h.to != uint16(t.self):
		return reasonWrongTarget
	}
	return reasonOK
}

// receive reads frames from a peer until the connection fails: messages go
// to the handler in order, verbs are served against the registered regions
// and answered on the same connection, flushed once no further frame is
// buffered (so a burst of verbs gets one write). This is the TLS path; plain
// TCP connections are received by receivePolled, which workers can share.
func (t *Transport) receive(conn net.Conn, from protocol.NodeID) error {
	in := t.newInStream(conn, conn, from)
	for {
		k, body, err := in.fr.next()
		if err != nil {
			return err
		}
		if err := in.dispatch(k, body); err != nil {
			return err
		}
		in.fr.release()
		if in.bw.Buffered() > 0 && !in.fr.ready() {
			if err := in.flush(); err != nil {
				return err
			}
		}
	}
}

// inStream is the receiving state of one inbound connection: the frame
// reader over src, and the writer of verb replies.
type inStream struct {
	t       *Transport
	from    protocol.NodeID
	fr      frameReader
	bw      *bufio.Writer
	scratch []byte
}

func (t *Transport) newInStream(src io.Reader, conn net.Conn, from protocol.NodeID) *inStream {
	return &inStream{
		t: t, from: from,
		fr:      frameReader{br: bufio.NewReaderSize(src, readerSize), allowed: acceptorKinds},
		bw:      bufio.NewWriterSize(&timedWriter{conn: conn, timeout: t.cfg.PeerTimeout}, writerSize),
		scratch: make([]byte, 0, hdrSize+verbHdrSize),
	}
}

// dispatch hands a message to the handler or serves a verb (its reply is
// buffered until flush).
func (in *inStream) dispatch(k kind, body []byte) error {
	t := in.t
	if k == kindMsg {
		if t.closed.Load() {
			return net.ErrClosed
		}
		var payload []byte
		if len(body) > protocol.FrameSize {
			payload = body[protocol.FrameSize:len(body):len(body)] // an append must not reach the next frame
		}
		t.cfg.Handler(in.from, body[:protocol.FrameSize:protocol.FrameSize], payload)
		return nil
	}
	v, err := decodeVerb(k, body)
	if err != nil {
		return err
	}
	if err := t.serveVerb(in.bw, in.scratch, v); err != nil {
		return fmt.Errorf("tcp: answering node %d: %w", in.from, err)
	}
	return nil
}

// flush writes the buffered verb replies.
func (in *inStream) flush() error {
	if in.bw.Buffered() == 0 {
		return nil
	}
	if err := in.bw.Flush(); err != nil {
		return fmt.Errorf("tcp: answering node %d: %w", in.from, err)
	}
	return nil
}

// serveVerb runs a verb request against this node's regions and writes the
// reply to bw (the bytes of a Read straight from the region).
func (t *Transport) serveVerb(bw *bufio.Writer, scratch []byte, v verbReq) error {
	atomicOp := v.kind == kindCAS || v.kind == kindFAA
	mem, st := t.access(v.key, v.off, uint64(v.n), atomicOp)
	var value uint64
	var data []byte
	if st == statusOK {
		switch v.kind {
		case kindRead:
			data = mem
		case kindWrite:
			copy(mem, v.data)
		case kindCAS:
			value = casWord(word(mem), v.a, v.b)
		case kindFAA:
			value = faaWord(word(mem), v.a)
		}
	}
	if _, err := bw.Write(appendReplyHdr(scratch[:0], v.id, st, value, len(data))); err != nil {
		return err
	}
	_, err := bw.Write(data)
	return err
}

// timedWriter keeps a write deadline of about PeerTimeout on the
// connection: a peer that stops reading fails the connection instead of
// holding its writer, and a long busy stream never trips a deadline set
// when it began. The deadline moves only once half of it is used, so most
// writes cost no timer update.
type timedWriter struct {
	conn     net.Conn
	timeout  time.Duration
	deadline time.Time
}

func (w *timedWriter) Write(b []byte) (int, error) {
	if now := time.Now(); w.deadline.Sub(now) < w.timeout/2 {
		w.deadline = now.Add(w.timeout)
		w.conn.SetWriteDeadline(w.deadline)
	}
	return w.conn.Write(b)
}
