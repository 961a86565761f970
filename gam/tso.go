package gam

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// writeBuffer is a TSO node's store buffer: the writes its workers were
// told are done, made visible one at a time in the order the node's
// worker took them (GAM's worker serves a node's requests in order). A
// worker's read of a key it has a buffered write to returns its newest
// such write (a thread reads its own writes); everything else reads
// through the cache and the directory, which see only drained writes.
type writeBuffer struct {
	n *node
	// entries wait to drain, oldest first; head is draining (headOn).
	entries []protocolapi.Op
	head    protocolapi.Op
	headOn  bool
	// accepted counts the writes told done or held, not drained yet;
	// held are the writes beyond cap whose workers wait for room.
	accepted int
	held     []protocolapi.Op
	cap      int
}

// accept takes a worker's write as GAM's asynchronous write does: the
// worker goes on at once while fewer than cap of the node's writes are
// waiting to drain, and otherwise waits until one drained.
func (b *writeBuffer) accept(op protocolapi.Op) {
	b.accepted++
	if b.accepted-len(b.held) <= b.cap {
		b.n.env.Complete(op, protocolapi.Result{})
		return
	}
	b.held = append(b.held, op)
}

// push puts a write the node's worker has taken behind the others.
func (b *writeBuffer) push(op protocolapi.Op) { b.entries = append(b.entries, op) }

// drainNext starts draining the next write unless one is draining: it
// goes to its key's home or cache as a write that no worker waits for.
// It is called after every item the worker served, never from inside a
// line's or a directory entry's loop.
func (b *writeBuffer) drainNext() {
	for !b.headOn && len(b.entries) > 0 {
		i := 0
		if b.n.mut.drainOutOfOrder {
			i = int(b.n.env.Rand() % uint64(len(b.entries)))
		}
		b.head, b.headOn = b.entries[i], true
		b.entries = append(b.entries[:i], b.entries[i+1:]...)
		b.n.issue(req{op: b.head, drain: true})
	}
}

// drained is called when the head's write is visible: a held worker, if
// any, goes on.
func (b *writeBuffer) drained() {
	b.headOn = false
	b.accepted--
	if len(b.held) > 0 {
		op := b.held[0]
		b.held = b.held[1:]
		b.n.env.Complete(op, protocolapi.Result{})
	}
}

// forward returns worker's newest buffered write of key.
func (b *writeBuffer) forward(worker int, key uint64) (uint64, bool) {
	for i := len(b.entries) - 1; i >= 0; i-- {
		if op := b.entries[i]; op.Worker == worker && op.Key == key {
			return op.Value, true
		}
	}
	if b.headOn && b.head.Worker == worker && b.head.Key == key {
		return b.head.Value, true
	}
	return 0, false
}

// buffered lists the values of key's writes not yet visible, oldest first.
func (b *writeBuffer) buffered(key uint64) []uint64 {
	var out []uint64
	if b.headOn && b.head.Key == key {
		out = append(out, b.head.Value)
	}
	for _, op := range b.entries {
		if op.Key == key {
			out = append(out, op.Value)
		}
	}
	return out
}

func (b *writeBuffer) describe() string {
	if b.accepted == 0 {
		return ""
	}
	s := fmt.Sprintf(" write buffer: %d writes not visible (%d buffered, draining %v, %d workers held)", b.accepted, len(b.entries), b.headOn, len(b.held))
	if b.headOn {
		s += fmt.Sprintf(", head: key %d value %d", b.head.Key, b.head.Value)
	}
	return s
}
