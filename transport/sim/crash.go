package sim

import "github.com/scalestore-go/scalestore/protocol"

// Node crashes (docs/protocol.md, "Node crashes"). A crashed node sends and
// receives nothing: a message to or from it is dropped, whether it is sent
// after the crash or was on its way. Its SSD survives, and a write the
// device had started completes (the caller decides whether the node's own
// completion callbacks still run). A view change drops every message in
// flight in the whole cluster (DropMessages): the membership service fences
// the old view, so nothing sent in it is delivered in the next.

// Kill crashes node: from now on nothing is delivered to it or sent by it.
func (w *World) Kill(node protocol.NodeID) {
	if w.dead == nil {
		w.dead = make([]bool, w.n)
	}
	w.dead[node] = true
	w.mix(0xDEAD<<16 | uint64(node))
}

// Revive lets node send and receive again (its restart).
func (w *World) Revive(node protocol.NodeID) {
	if w.dead != nil {
		w.dead[node] = false
	}
	w.mix(0xA11E<<16 | uint64(node))
}

// Dead reports whether node is crashed.
func (w *World) Dead(node protocol.NodeID) bool { return w.dead != nil && w.dead[node] }

// DropMessages removes every message in flight and returns how many there
// were. The events left keep their order (time, sequence).
func (w *World) DropMessages() int {
	dropped := 0
	w.events.removeIf(func(e *event) bool {
		if e.kind != evMsg && e.kind != evFrame {
			return false
		}
		dropped++
		if cap(e.payload) >= protocol.PageSize {
			w.pages = append(w.pages, e.payload)
		}
		e.payload = nil
		w.free = append(w.free, e)
		return true
	})
	clear(w.linkLast)
	clear(w.sentLast)
	w.mix(0xF3C3<<32 | uint64(dropped))
	return dropped
}

// ioAt is when a storage operation on node's slot issued now completes.
// With OrderedIO, operations on one slot complete in the order they were
// issued: a write that started before a crash can then never land over a
// newer write of the same page, and a read issued after a write sees it.
func (w *World) ioAt(node protocol.NodeID, slot uint64, write bool) int64 {
	at := w.now + w.ioLatency(write)
	if !w.OrderedIO {
		return at
	}
	if w.slotLast == nil {
		w.slotLast = make(map[uint64]int64)
	}
	key := uint64(node)<<48 | slot
	at = max(at, w.slotLast[key])
	w.slotLast[key] = at
	return at
}
