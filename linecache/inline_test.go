package linecache

import (
	"encoding/binary"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/transport"
)

// regions is a Poster over plain memory, one byte slice per node.
type regions map[protocol.NodeID][]byte

func (m regions) Read(dst []byte, r transport.Region, off uint64, done func(error)) {
	copy(dst, m[r.Node][off:])
	done(nil)
}

func (m regions) Write(r transport.Region, off uint64, src []byte, done func(error)) {
	copy(m[r.Node][off:], src)
	done(nil)
}

func (m regions) CompareAndSwap(r transport.Region, off, old, new uint64, done func(uint64, error)) {
	w := m[r.Node][off:]
	prev := binary.LittleEndian.Uint64(w)
	if prev == old {
		binary.LittleEndian.PutUint64(w, new)
	}
	done(prev, nil)
}

func (m regions) FetchAndAdd(r transport.Region, off, delta uint64, done func(uint64, error)) {
	w := m[r.Node][off:]
	prev := binary.LittleEndian.Uint64(w)
	binary.LittleEndian.PutUint64(w, prev+delta)
	done(prev, nil)
}

// countingWaiter counts wake-ups and never waits.
type countingWaiter struct{ wakes int }

func (w *countingWaiter) Park()       {}
func (w *countingWaiter) Wake()       { w.wakes++ }
func (w *countingWaiter) Sleep(int64) {}
func (w *countingWaiter) MaybeYield() {}

// TestInlineServing: a worker between BeginInline and EndInline answers
// the invalidations itself (the sender's status word is written) and the
// handler is not woken for them; one left when the worker ends its turn
// wakes the handler, and a second server never answers while one is.
func TestInlineServing(t *testing.T) {
	const memNode, other = protocol.NodeID(2), protocol.NodeID(1)
	mem := regions{
		memNode: make([]byte, MemoryBytes(8)),
		other:   make([]byte, ReplyBytes(1)), // node 1's reply slots
	}
	reply := make([]byte, ReplyBytes(1))
	c, err := New(Config{Self: 0, ID: 0, Computes: []protocol.NodeID{0, other},
		Replies:  []transport.Region{{Node: 0, Len: uint64(len(reply))}, {Node: other, Len: uint64(len(mem[other]))}},
		ReplyMem: reply, Memory: map[protocol.NodeID]transport.Region{memNode: {Node: memNode, Len: uint64(len(mem[memNode]))}},
		Frames: 4, Threads: 1, RTT: 1, Inbox: 4, Post: mem, Now: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	handler := &countingWaiter{}
	c.mu.Lock()
	c.handler, c.idle = &Thread{P: handler}, true // parked in Serve
	c.mu.Unlock()
	inv := func(round uint32) *protocol.Message {
		return &protocol.Message{Type: protocol.TLineInvalidate, From: other, To: 0, Mode: protocol.ModeExclusive,
			PID: protocol.MakePID(memNode, 3), Epoch: 1, K: 0, Pred: round}
	}
	status := func() uint64 { return binary.LittleEndian.Uint64(mem[other][statusOffset(0, 0):]) }
	worker := &Thread{P: &countingWaiter{}}

	c.BeginInline()
	if err := c.Deliver(inv(1)); err != nil {
		t.Fatal(err)
	}
	if handler.wakes != 0 {
		t.Fatalf("the handler was woken %d times for a message a worker is about to answer", handler.wakes)
	}
	if n, err := c.ServeWaiting(worker); n != 1 || err != nil {
		t.Fatalf("ServeWaiting answered %d (%v), want 1", n, err)
	}
	c.EndInline()
	if r := selcc.ParseStatus(status(), 1); r == selcc.NoReply {
		t.Fatalf("no answer of round 1 in the sender's slot (status %#x)", status())
	}
	if handler.wakes != 0 {
		t.Fatalf("the handler was woken with nothing left for it")
	}

	// Another goroutine is answering: a worker takes nothing, and the
	// message left when its turn ends goes to the handler.
	c.serving.Lock()
	c.BeginInline()
	if err := c.Deliver(inv(2)); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.ServeWaiting(worker); n != 0 {
		t.Fatalf("ServeWaiting answered %d while another answer ran", n)
	}
	c.EndInline()
	c.serving.Unlock()
	if handler.wakes != 1 {
		t.Fatalf("the handler was woken %d times for the message left in the inbox, want 1", handler.wakes)
	}
	if selcc.ParseStatus(status(), 2) != selcc.NoReply {
		t.Fatalf("round 2 was answered although no server took it")
	}
}
