package ibverbs

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Two-sided messages over one-sided writes (paper §3.5, L5 §IV).
//
// Every node keeps, for every peer, a ring of Mailboxes slots in registered
// memory (its mailboxes at that peer's disposal). The sender builds a
// message in the matching slot of a local staging ring and RDMA-writes it,
// frame, payload and trailer in ONE write, into the receiver's slot; the
// trailer's last byte is the doorbell. The receiver's poller checks only
// the trailer word of the next expected slot of each peer, hands the
// message to the handler in place, clears the trailer and moves on.
//
// The doorbell being last relies on RC placing the bytes of one RDMA write
// in address order, which L5 and ScaleStore rely on and every hardware RDMA
// implementation provides (L5 cites it as documented for all of them). It
// is NOT guaranteed by RFC 5040 for software iWARP stacks; on those the
// trailer could be seen before the payload. The trailer therefore also
// carries the message's sequence number, which at least rejects a stale
// doorbell from the slot's previous use.
//
// Slots are reused in ring order, so messages from one node to another are
// handled in the order they were sent, as the Transport contract demands.
// The receiver returns slots in batches: after consuming half a ring it
// RDMA-writes its consumed count into the sender's credit word. A sender
// reuses a slot once (a) the credit word says the receiver consumed the
// slot's previous message and (b) the write that read the staging slot has
// completed locally (no retransmission can read it again). (b) needs a
// completion, and writes are mostly unsignaled (selective signaling), so
// the message in the last slot of each half ring is signaled: whenever a
// sender comes back to a slot, a signaled write at or after the slot's old
// message has been posted.
//
// Messages whose write fits the QP's inline size (a bare 64-byte frame
// does) are posted inline: the staging slot is free the moment the post
// returns and the NIC need not read it back over PCIe.

// msgLink is the RC queue pair that carries both nodes' messages, credits
// and page transfers between two nodes, with its send-queue accounting.
type msgLink struct {
	p      *peer
	qp     QP
	depth  uint64
	inline int

	mu           sync.Mutex
	posted       uint64 // work requests posted
	lastSignaled uint64
	// completed is the last work request known complete: RC completes in
	// order, so a signaled completion completes everything before it.
	// Written by the completion poller only.
	completed atomic.Uint64
}

// wr_id layout: the top two bits say who posted the request.
const (
	idKindShift = 62
	idMsg       = 1
	idOS        = 2
	idSeqMask   = 1<<48 - 1
)

func msgID(node protocol.NodeID, seq uint64) uint64 {
	return idMsg<<idKindShift | uint64(node)<<48 | seq&idSeqMask
}

// postLocked posts wrs (l.mu held). The send queue never overflows: a post
// waits while it would hold more than depth entries, and every depth/4
// requests one is signaled so that a completion eventually frees them.
func (l *msgLink) postLocked(wrs []WorkRequest, signalLast bool) (uint64, error) {
	p := l.p
	n := uint64(len(wrs))
	if err := p.t.waitFor(p, "send queue room", func() bool {
		return l.posted+n-l.completed.Load() <= l.depth
	}); err != nil {
		return 0, err
	}
	for i := range wrs {
		l.posted++
		wrs[i].ID = msgID(p.id, l.posted)
		if (signalLast && i == len(wrs)-1) || l.posted-l.lastSignaled >= l.depth/4 {
			wrs[i].Flags |= FlagSignaled
			l.lastSignaled = l.posted
		}
	}
	if err := l.qp.Post(wrs); err != nil {
		err = fmt.Errorf("%w: posting to node %d: %v", transport.ErrPeerDown, p.id, err)
		p.fail(err)
		return 0, err
	}
	return l.posted, nil
}

func (l *msgLink) post(wrs []WorkRequest, signalLast bool) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.postLocked(wrs, signalLast)
}

// fence waits until every request posted so far has completed, so that
// what follows on another queue pair is ordered after it. If the last
// requests were unsignaled it posts a signaled zero-length write, which
// touches no memory.
func (l *msgLink) fence() error {
	l.mu.Lock()
	target := l.posted
	if l.completed.Load() >= target {
		l.mu.Unlock()
		return nil
	}
	if l.lastSignaled < target {
		wr := [1]WorkRequest{{Op: OpWrite, RemoteAddr: l.p.remote.RingAddr, RKey: l.p.remote.RingKey}}
		var err error
		if target, err = l.postLocked(wr[:], true); err != nil {
			l.mu.Unlock()
			return err
		}
	}
	l.mu.Unlock()
	return l.p.t.waitFor(l.p, "earlier messages to complete", func() bool { return l.completed.Load() >= target })
}

// msgComplete handles a completion of the message queue pair.
func (t *Transport) msgComplete(c Completion) {
	p := t.peers[protocol.NodeID(c.ID>>48)]
	if p == nil || p.msg == nil {
		return
	}
	if c.Status != StatusSuccess {
		// Both ends of the pair are in the error state now and messages
		// in flight are lost: the peer is unusable.
		p.fail(fmt.Errorf("%w: %v to node %d completed with %v (vendor error %#x)",
			transport.ErrPeerDown, c.Op, p.id, c.Status, c.Vendor))
		return
	}
	if seq := c.ID & idSeqMask; seq > p.msg.completed.Load() {
		p.msg.completed.Store(seq)
	}
}

func trailer(payloadLen int, seq uint64) uint64 {
	return uint64(payloadLen) | uint64(uint32(seq))<<24 | uint64(doorbell)<<56
}

// pageWrite is the page of WriteSend: written into a frame the receiver
// registered, on the message queue pair, before the message.
type pageWrite struct {
	dst  transport.Region
	off  uint64
	page []byte
}

// sendMsg writes one message (and optionally a page before it) to p.
func (t *Transport) sendMsg(p *peer, frame, payload []byte, pw *pageWrite) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if err := p.err(); err != nil {
		return err
	}
	s := uint64(t.slots)
	seq := p.sent
	slot := seq % s
	if err := t.waitFor(p, "a free mailbox slot", func() bool {
		return seq-loadLE(p.credit) < s && p.msg.completed.Load() >= p.slotWR[slot]
	}); err != nil {
		return err
	}
	stage := p.stage[slot*slotSize:][:slotSize]
	stageAddr := p.stageAddr + slot*slotSize
	n := len(payload) + protocol.FrameSize + trailerSize
	start := slotSize - n
	copy(stage[start:], payload)
	copy(stage[slotSize-trailerSize-protocol.FrameSize:], frame)
	binary.LittleEndian.PutUint64(stage[slotSize-trailerSize:], trailer(len(payload), seq))

	var wrs [2]WorkRequest
	k := 0
	needsCompletion := false
	if pw != nil {
		// The page goes first, into the requester's frame; RC executes
		// the two writes in order, so the page is in place before the
		// response's doorbell. The message has no payload, so the
		// front of the staging slot is free for the page.
		copy(stage, pw.page)
		wrs[0] = WorkRequest{Op: OpWrite, LocalAddr: stageAddr, Length: uint32(len(pw.page)), LKey: t.sendMR.LKey,
			RemoteAddr: pw.off, RKey: pw.dst.Key}
		if len(pw.page) <= p.msg.inline {
			wrs[0].Flags |= FlagInline
		} else {
			needsCompletion = true
		}
		k++
	}
	wrs[k] = WorkRequest{Op: OpWrite, LocalAddr: stageAddr + uint64(start), Length: uint32(n), LKey: t.sendMR.LKey,
		RemoteAddr: p.remote.RingAddr + slot*slotSize + uint64(start), RKey: p.remote.RingKey}
	if n <= p.msg.inline {
		wrs[k].Flags |= FlagInline
	} else {
		needsCompletion = true
	}
	k++
	half := max(1, s/2)
	last, err := p.msg.post(wrs[:k], slot%half == half-1)
	if err != nil {
		return err
	}
	p.slotWR[slot] = 0
	if needsCompletion {
		p.slotWR[slot] = last
	}
	p.sent++
	return nil
}

// Send implements transport.Messenger.
func (t *Transport) Send(to protocol.NodeID, frame, payload []byte) error {
	if len(frame) != protocol.FrameSize || len(payload) > transport.MaxPayload {
		return fmt.Errorf("%w: frame of %d bytes, payload of %d", transport.ErrFrameSize, len(frame), len(payload))
	}
	p, err := t.peerFor(to)
	if err != nil {
		return err
	}
	if !t.enter() {
		return fmt.Errorf("%w: send to node %d", transport.ErrClosed, to)
	}
	defer t.leave()
	return t.sendMsg(p, frame, payload, nil)
}

// WriteSend is the page transfer of paper §3.5: it RDMA-writes page into
// dst at off (typically the requester's buffer frame, which it registered
// and named in its request) and then sends frame to dst.Node, both on the
// message queue pair, so the page is in place before the message arrives
// and the receiver copies nothing. Bounds are checked here; a wrong key is
// caught by the receiver's NIC, which on RC breaks the message queue pair
// for good: the peer is then reported down (ErrPeerDown), so callers name
// only frames the receiver itself offered.
func (t *Transport) WriteSend(dst transport.Region, off uint64, page, frame []byte) error {
	if len(frame) != protocol.FrameSize || len(page) == 0 || len(page) > transport.MaxPayload {
		return fmt.Errorf("%w: frame of %d bytes, page of %d", transport.ErrFrameSize, len(frame), len(page))
	}
	p, err := t.peerFor(dst.Node)
	if err != nil {
		return err
	}
	if end := off + uint64(len(page)); end < off || end > dst.Len {
		return fmt.Errorf("%w: page of %d bytes at offset %d of a %d-byte region on node %d",
			transport.ErrAccess, len(page), off, dst.Len, dst.Node)
	}
	if !t.enter() {
		return fmt.Errorf("%w: write-send to node %d", transport.ErrClosed, dst.Node)
	}
	defer t.leave()
	return t.sendMsg(p, frame, nil, &pageWrite{dst: dst, off: off, page: page})
}

// pollMailboxes is the message handler's loop: it scans the next slot of
// every peer's ring and runs the handler on each message that arrived.
func (t *Transport) pollMailboxes() {
	defer t.wg.Done()
	b := backoff{busy: t.cfg.BusyPoll}
	for !t.closed.Load() {
		got := 0
		for _, p := range t.order {
			if p.up.Load() {
				got += t.drain(p)
			}
		}
		if got == 0 {
			b.wait()
		} else {
			b.reset()
		}
	}
}

// drain handles the messages waiting in p's ring, at most one ring's worth
// so that one busy peer does not starve the others.
func (t *Transport) drain(p *peer) int {
	s := uint64(t.slots)
	n := 0
	for n < t.slots {
		slot := p.consumed % s
		m := p.ring[slot*slotSize:][:slotSize]
		tr := m[slotSize-trailerSize:]
		w := loadLE(tr)
		if byte(w>>56) != doorbell || uint32(w>>24) != uint32(p.consumed) {
			break
		}
		plen := int(w & 0xffff)
		if plen > transport.MaxPayload || byte(w>>16) != 0 {
			// Only a broken or hostile peer writes this; stop reading
			// its ring rather than hand garbage on.
			p.fail(fmt.Errorf("%w: node %d wrote a malformed mailbox trailer %#x", transport.ErrPeerDown, p.id, w))
			break
		}
		if t.closed.Load() {
			break
		}
		fr := m[slotSize-trailerSize-protocol.FrameSize : slotSize-trailerSize]
		var payload []byte
		if plen > 0 {
			payload = m[slotSize-trailerSize-protocol.FrameSize-plen : slotSize-trailerSize-protocol.FrameSize]
		}
		t.handler(p.id, fr, payload)
		storeLE(tr, 0)
		p.consumed++
		n++
		if p.consumed-p.published >= t.creditEvery {
			t.publishCredit(p)
		}
	}
	return n
}

// publishCredit tells p how many of its messages were consumed.
func (t *Transport) publishCredit(p *peer) {
	if p.err() != nil {
		return
	}
	p.published = p.consumed
	storeLE(p.creditStage, p.consumed)
	wr := [1]WorkRequest{{Op: OpWrite, LocalAddr: p.creditStageAddr, Length: 8, LKey: t.sendMR.LKey,
		RemoteAddr: p.remote.CreditAddr, RKey: p.remote.RingKey}}
	if 8 <= p.msg.inline {
		wr[0].Flags |= FlagInline
	}
	// A failed post marks the peer down; nothing else to do here.
	_, _ = p.msg.post(wr[:], false)
}

// backoff is how pollers and waiters idle: spin (yielding) for a while,
// then sleep a microsecond at a time (about 20 µs in practice), then
// longer, so an idle node costs little CPU while a busy one reacts within
// microseconds. BusyPoll never sleeps, as a dedicated-core deployment
// wants.
type backoff struct {
	n    int
	busy bool
}

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) wait() {
	b.n++
	switch {
	case b.busy || b.n <= 64:
		runtime.Gosched()
	case b.n <= 4096:
		time.Sleep(time.Microsecond)
	default:
		time.Sleep(200 * time.Microsecond)
	}
}

// waitFor polls cond until it holds, failing when the peer fails, the
// transport closes or PeerTimeout passes.
func (t *Transport) waitFor(p *peer, what string, cond func() bool) error {
	if cond() {
		return nil
	}
	deadline := time.Now().Add(t.cfg.PeerTimeout)
	b := backoff{busy: t.cfg.BusyPoll}
	for {
		if t.closed.Load() {
			return fmt.Errorf("%w: waiting for %s of node %d", transport.ErrClosed, what, p.id)
		}
		if err := p.err(); err != nil {
			return err
		}
		b.wait()
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: node %d: no %s within %v", transport.ErrPeerDown, p.id, what, t.cfg.PeerTimeout)
		}
	}
}
