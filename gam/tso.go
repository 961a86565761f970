package gam

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// writeBuffer is a TSO node's store buffers, one a thread (worker), as a
// processor core has: the writes a thread was told are done, made visible
// one at a time in the thread's order, while other threads' writes drain
// beside them. A thread's read of a key it has a buffered write to
// returns its newest such write (a thread reads its own writes);
// everything else reads through the cache and the directory, which see
// only drained writes.
type writeBuffer struct {
	n       *node
	threads []threadBuffer
	cap     int
}

// threadBuffer is one thread's store buffer.
type threadBuffer struct {
	// entries wait to drain, oldest first; head is draining (headOn).
	entries []protocolapi.Op
	head    protocolapi.Op
	headOn  bool
	// accepted counts the thread's writes told done or held, not drained
	// yet; held is the write beyond cap whose thread waits for room.
	accepted int
	held     protocolapi.Op
	heldOn   bool
}

func (b *writeBuffer) thread(worker int) *threadBuffer {
	for worker >= len(b.threads) {
		b.threads = append(b.threads, threadBuffer{})
	}
	return &b.threads[worker]
}

// accept takes a thread's write as GAM's asynchronous write does: the
// thread goes on at once while fewer than cap of its writes wait to
// drain, and otherwise waits until one drained.
func (b *writeBuffer) accept(op protocolapi.Op) {
	t := b.thread(op.Worker)
	t.accepted++
	if t.accepted <= b.cap {
		b.n.env.Complete(op, protocolapi.Result{})
		return
	}
	t.held, t.heldOn = op, true
	b.n.count.held++
}

// push puts a write the node's worker has taken behind its thread's
// others.
func (b *writeBuffer) push(op protocolapi.Op) {
	t := b.thread(op.Worker)
	t.entries = append(t.entries, op)
}

// drainNext starts draining every thread's next write unless one of the
// thread's is draining: it goes to its key's home or cache as a write
// that no thread waits for. It is called after every item the node's
// worker served, never from inside a line's or a directory entry's loop.
func (b *writeBuffer) drainNext() {
	for w := range b.threads {
		t := &b.threads[w]
		for !t.headOn && len(t.entries) > 0 {
			i := 0
			if b.n.mut.drainOutOfOrder {
				i = int(b.n.env.Rand() % uint64(len(t.entries)))
			}
			t.head, t.headOn = t.entries[i], true
			t.entries = append(t.entries[:i], t.entries[i+1:]...)
			b.n.issue(req{op: t.head, drain: true})
		}
	}
}

// drained is called when worker's head write is visible: the thread, if
// it waits for room, goes on.
func (b *writeBuffer) drained(worker int) {
	t := b.thread(worker)
	t.headOn = false
	t.accepted--
	if t.heldOn {
		t.heldOn = false
		b.n.env.Complete(t.held, protocolapi.Result{})
	}
}

// forward returns worker's newest buffered write of key.
func (b *writeBuffer) forward(worker int, key uint64) (uint64, bool) {
	t := b.thread(worker)
	for i := len(t.entries) - 1; i >= 0; i-- {
		if op := t.entries[i]; op.Key == key {
			return op.Value, true
		}
	}
	if t.headOn && t.head.Key == key {
		return t.head.Value, true
	}
	return 0, false
}

// pending counts the writes told done or held, not yet visible.
func (b *writeBuffer) pending() int {
	n := 0
	for w := range b.threads {
		n += b.threads[w].accepted
	}
	return n
}

// buffered lists the values of key's writes not yet visible, per thread
// oldest first.
func (b *writeBuffer) buffered(key uint64) []uint64 {
	var out []uint64
	for w := range b.threads {
		t := &b.threads[w]
		if t.headOn && t.head.Key == key {
			out = append(out, t.head.Value)
		}
		for _, op := range t.entries {
			if op.Key == key {
				out = append(out, op.Value)
			}
		}
	}
	return out
}

func (b *writeBuffer) describe() string {
	s := ""
	for w := range b.threads {
		t := &b.threads[w]
		if t.accepted == 0 {
			continue
		}
		s += fmt.Sprintf(" thread %d's buffer: %d writes not visible (%d buffered, held %v)", w, t.accepted, len(t.entries), t.heldOn)
		if t.headOn {
			s += fmt.Sprintf(", draining key %d value %d", t.head.Key, t.head.Value)
		}
	}
	return s
}
