package tcp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// TestCorkedAnswersKeepOrderAndShareWrites: node 1 answers each of node
// 0's messages from its handler (as a primary acknowledges write-throughs)
// while a goroutine of its own sends a second stream to node 0. Both
// streams arrive whole and in order, and the answers, sent while their
// drain was running, went out in fewer writes than there were answers.
func TestCorkedAnswersKeepOrderAndShareWrites(t *testing.T) {
	const n = 20_000
	const ownBase = 1 << 40 // node 1's own stream, told apart from the answers
	var tr1 atomic.Pointer[Transport]
	send := func(tr *Transport, to protocol.NodeID, seq uint64) {
		ok, err := tr.TrySend(to, msgFrame(seq), nil)
		if err == nil && !ok {
			err = tr.Send(to, msgFrame(seq), nil)
		}
		if err != nil {
			t.Error(err)
		}
	}
	answer := func(from protocol.NodeID, frame, payload []byte) {
		send(tr1.Load(), from, frameSeq(frame))
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
		for i := range uint64(n) {
			send(ts[1], 0, ownBase+i)
		}
	}()
	for i := range uint64(n) {
		send(ts[0], 1, i)
	}
	<-done
	got.waitSeq(t, 1, n-1)
	got.waitSeq(t, 1, ownBase+n-1)
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
	if answers != n || own != n {
		t.Fatalf("%d answers and %d of node 1's messages arrived, want %d each", answers, own, n)
	}
	msgs, writes := ts[1].directMsgs.Load()-msgsBefore, ts[1].directWrites.Load()-writesBefore
	if msgs < n || writes*2 > msgs {
		t.Fatalf("node 1 wrote %d messages itself in %d writes: fewer than two messages a write", msgs, writes)
	}
	t.Logf("node 1 wrote %d of its %d messages itself, in %d writes", msgs, 2*n, writes)
}

// TestCorkedSurvivesAReconnect: messages corked when their connection
// fails are whole messages, not bytes of that connection: the next
// connection's writer writes them, before anything sent after them.
func TestCorkedSurvivesAReconnect(t *testing.T) {
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
	// The next connection's writer writes them (no send wakes it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.wmu.Lock()
		left := len(p.corked)
		p.wmu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d corked bytes still wait 10 s after the connection broke", left)
		}
		time.Sleep(time.Millisecond)
	}
	if err := ts[0].Send(1, msgFrame(2), nil); err != nil {
		t.Fatal(err)
	}
	got.waitSeq(t, 0, 2)
	if seqs := got.from(0); len(seqs) != 3 || seqs[0] != 0 || seqs[1] != 1 || seqs[2] != 2 {
		t.Fatalf("node 1 received %v, want [0 1 2]", seqs)
	}
}
