package tcp

import (
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
