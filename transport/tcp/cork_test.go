package tcp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// TestCorkedAnswersKeepOrderAndShareWrites: node 1 answers each of node
// 0's messages from its handler (TrySendCorked, as a primary acknowledges
// write-throughs) while a goroutine of its own sends a second stream to
// node 0 (TrySend, written at once). Both streams arrive whole and in
// order, and the answers went out in fewer writes than there were
// messages.
func TestCorkedAnswersKeepOrderAndShareWrites(t *testing.T) {
	const n = 20_000
	const ownN = n / 10     // node 1's own messages, each written at once
	const ownBase = 1 << 40 // node 1's own stream, told apart from the answers
	var tr1 atomic.Pointer[Transport]
	send := func(tr *Transport, to protocol.NodeID, seq uint64, corked bool) {
		try := tr.TrySend
		if corked {
			try = tr.TrySendCorked
		}
		ok, err := try(to, msgFrame(seq), nil)
		if err == nil && !ok {
			err = tr.Send(to, msgFrame(seq), nil)
		}
		if err != nil {
			t.Error(err)
		}
	}
	answer := func(from protocol.NodeID, frame, payload []byte) {
		send(tr1.Load(), from, frameSeq(frame), true)
	}
	got := newCollector()
	ts := startCluster(t, []transport.Handler{got.handler, answer}, nil)
	tr1.Store(ts[1])
	startPollers(t, ts[1])
	exchangeWarm(t, ts[0])
	msgsBefore, writesBefore := ts[1].directMsgs.Load(), ts[1].directWrites.Load()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range uint64(ownN) {
			send(ts[1], 0, ownBase+i, false)
		}
	}()
	// Through node 0's writer, which writes what is queued together: node
	// 1's drains get many frames at once, as a busy primary does.
	for i := range uint64(n) {
		if err := ts[0].Send(1, msgFrame(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	got.waitSeq(t, 1, n-1)
	got.waitSeq(t, 1, ownBase+ownN-1)
	var answers, own uint64
	for _, s := range got.from(1) {
		switch {
		case s >= ownBase:
			if s != ownBase+own {
				t.Fatalf("node 1's message %d arrived as %d: out of order or twice", own, s-ownBase)
			}
			own++
		default:
			if s != answers {
				t.Fatalf("answer %d arrived as %d: out of order or twice", answers, s)
			}
			answers++
		}
	}
	if answers != n || own != ownN {
		t.Fatalf("%d answers and %d of node 1's messages arrived, want %d and %d", answers, own, n, ownN)
	}
	msgs, writes := ts[1].directMsgs.Load()-msgsBefore, ts[1].directWrites.Load()-writesBefore
	if msgs < n/2 || writes*2 > msgs {
		t.Fatalf("node 1 wrote %d messages itself in %d writes: fewer than two messages a write", msgs, writes)
	}
	t.Logf("node 1 wrote %d of its %d messages itself, in %d writes", msgs, n+ownN, writes)
}

// TestCorkedGoesWithItsConnection: messages corked when their connection
// fails go with it, as what was written to it does (the next connection
// may be to a new process); what is sent after the reconnect arrives.
func TestCorkedGoesWithItsConnection(t *testing.T) {
	got := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := startCluster(t, []transport.Handler{nop, got.handler}, nil)
	exchangeWarm(t, ts[0])
	p := ts[0].peer(1)
	// Cork two messages as a drain would, and break the connection
	// before anybody uncorks them.
	p.wmu.Lock()
	for seq := range uint64(2) {
		f := msgFrame(seq)
		b := appendHeader(p.corked, kindMsg, len(f))
		p.corked = append(b, f...)
	}
	p.wmu.Unlock()
	ts[1].inMu.Lock()
	for _, ic := range ts[1].inbound {
		ic.raw.Close()
	}
	ts[1].inMu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.wmu.Lock()
		left := len(p.corked)
		p.wmu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d corked bytes still wait 10 s after their connection broke", left)
		}
		time.Sleep(time.Millisecond)
	}
	for seq := uint64(2); ; seq++ {
		ok, err := ts[0].TrySend(1, msgFrame(seq), nil)
		if err == nil && !ok {
			err = ts[0].Send(1, msgFrame(seq), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if s := got.from(0); len(s) > 0 {
			if s[0] < 2 {
				t.Fatalf("node 1 received %v: a message corked on the broken connection came on the next", s)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing arrived after the reconnect")
		}
	}
}

// TestCorkedKeepOrderWhenTheSocketIsFull: node 1 answers every message
// with a page (TrySendCorked) to a node 0 that reads slowly, so node 1's
// socket fills and its writes are cut short. The cut message's remainder
// is the writer goroutine's to write: nothing corked later may be written
// before it. Every answer arrives once, whole and in order.
func TestCorkedKeepOrderWhenTheSocketIsFull(t *testing.T) {
	const n = 3_000
	var tr1 atomic.Pointer[Transport]
	answer := func(from protocol.NodeID, frame, _ []byte) {
		seq := frameSeq(frame)
		page := make([]byte, transport.MaxPayload)
		for i := range page {
			page[i] = byte(seq) ^ byte(i)
		}
		tr := tr1.Load()
		ok, err := tr.TrySendCorked(from, msgFrame(seq), page)
		if err == nil && !ok {
			err = tr.Send(from, msgFrame(seq), page)
		}
		if err != nil {
			t.Error(err)
		}
	}
	var mu sync.Mutex
	var seqs []uint64
	var bad error
	slow := func(_ protocol.NodeID, frame, payload []byte) {
		seq := frameSeq(frame)
		mu.Lock()
		defer mu.Unlock()
		for i, b := range payload {
			if b != byte(seq)^byte(i) && bad == nil {
				bad = fmt.Errorf("answer %d: byte %d of its page is %#x, want %#x", seq, i, b, byte(seq)^byte(i))
			}
		}
		if len(payload) != transport.MaxPayload && bad == nil {
			bad = fmt.Errorf("answer %d: page of %d bytes", seq, len(payload))
		}
		seqs = append(seqs, seq)
		if len(seqs)%64 == 0 {
			time.Sleep(2 * time.Millisecond) // a reader that falls behind
		}
	}
	ts := startCluster(t, []transport.Handler{slow, answer}, nil)
	tr1.Store(ts[1])
	startPollers(t, ts[1])
	exchangeWarm(t, ts[0])
	for i := range uint64(n) {
		if err := ts[0].Send(1, msgFrame(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got, err := len(seqs), bad
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answers arrived in 30 s", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seqs {
		if s != uint64(i) {
			t.Fatalf("answer %d arrived as %d: out of order or twice", i, s)
		}
	}
}

// TestCorkedGoOutAfterTheWritersDeadline: the writer goroutine leaves a
// write deadline (PeerTimeout) on the connection, and direct writes go on
// long after it passed while the writer has nothing to do. A passed
// deadline is the writer's business, not a failing connection: what a
// drain corked then must still go out, and so must a TrySend.
func TestCorkedGoOutAfterTheWritersDeadline(t *testing.T) {
	got := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := startCluster(t, []transport.Handler{nop, got.handler}, func(c *Config) {
		c.PeerTimeout = 50 * time.Millisecond
	})
	exchangeWarm(t, ts[0])
	if err := ts[0].Send(1, msgFrame(0), nil); err != nil { // the writer writes, and sets its deadline
		t.Fatal(err)
	}
	got.waitSeq(t, 0, 0)
	time.Sleep(150 * time.Millisecond) // the deadline passes
	// As a drain's handler does: cork, send, uncork.
	ts[0].cork()
	ok, err := ts[0].TrySendCorked(1, msgFrame(1), nil)
	ts[0].uncork()
	if err != nil || !ok {
		t.Fatalf("TrySendCorked after the deadline: %v, %v (a live connection takes it)", ok, err)
	}
	got.waitSeq(t, 0, 1)
	ok, err = ts[0].TrySend(1, msgFrame(2), nil)
	if err != nil || !ok {
		t.Fatalf("TrySend after the deadline: %v, %v (a live connection takes it)", ok, err)
	}
	got.waitSeq(t, 0, 2)
}
