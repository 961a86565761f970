package actors

import (
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Durable writes and node crashes (docs/protocol.md, "Node crashes").
//
// A write is acknowledged only once its page is on the directory's SSD: the
// writer, still holding the exclusive latch, sends the page to the
// directory (Persist), which writes it and acknowledges. No reader can see
// a value that is not durable (the latch keeps them out until the
// acknowledgement), so a crash loses no acknowledged write and no value
// anybody read: every valid copy in a surviving cache equals its
// directory's SSD copy, and every page without a surviving copy is whole
// on its SSD.
//
// A crash or a restart is a view change. The membership service (the
// simulator's coordinator) fences the old view: every message in flight is
// dropped, and each surviving node aborts what it had under way (Fence):
// outstanding requests are forgotten (their workers ask again), queued
// transfers and evictions are dropped, copies of the crashed node's pages
// are given up. Each surviving directory then rebuilds its metadata from
// the copies the survivors still hold (protocol.Directory.Rebuild). The
// crashed node comes back with an empty cache and a directory restored from
// its SSD: every page at home.

// persistWait is a worker waiting for its write-through.
type persistWait struct {
	w      *bufmgr.Worker
	acked  func()
	f      *bufmgr.Frame
	seq    uint32
	done   bool
	failed bool
}

// Persist writes the page of f, which w holds exclusively, through to its
// directory's SSD and waits for it to be there. It reports false when the
// page's directory crashed first: the write may or may not be on its SSD,
// and the copy is gone (the caller releases the guard and reports the
// write as indeterminate). acked, when not nil, is called the moment the
// acknowledgement is handled, before w runs again: from then on the write
// is durable, whenever w gets the CPU. Called with the node lock held on
// the real runtime (Local.Persist: w parks without it).
func (n *Node) Persist(w *bufmgr.Worker, f *bufmgr.Frame, acked func()) bool {
	if f.Mode != protocol.ModeExclusive {
		return false // a view change took the copy away while w wrote it
	}
	if n.cfg.Mutations.NoWriteThrough != nil && n.cfg.Mutations.NoWriteThrough() {
		if acked != nil {
			acked() // mutation: acknowledged while only this cache has it
		}
		return true
	}
	p := &persistWait{w: w, f: f, acked: acked}
	n.persists = append(n.persists, p)
	n.issuePersist(p)
	for !p.done {
		w.P.Park()
	}
	return !p.failed
}

// PersistAll is Persist of every frame of fs at once, in their order: the
// writes are issued together (to one directory, they reach its store in
// this order, and a store with a write log makes them durable in one log
// write, never a later one without the earlier ones), and w waits for all.
// It reports false if any failed.
func (n *Node) PersistAll(w *bufmgr.Worker, fs []*bufmgr.Frame) bool {
	for _, f := range fs {
		if f.Mode != protocol.ModeExclusive {
			return false
		}
	}
	if n.cfg.Mutations.NoWriteThrough != nil && n.cfg.Mutations.NoWriteThrough() {
		return true
	}
	waits := make([]*persistWait, len(fs))
	for i, f := range fs {
		p := &persistWait{w: w, f: f}
		n.persists = append(n.persists, p)
		n.issuePersist(p)
		waits[i] = p
	}
	ok := true
	for _, p := range waits {
		for !p.done {
			w.P.Park()
		}
		ok = ok && !p.failed
	}
	return ok
}

func (n *Node) issuePersist(p *persistWait) {
	n.persistSeq++
	p.seq = n.persistSeq
	pid := p.f.PID
	if pid.Dir() != n.id {
		n.send(protocol.Message{Type: protocol.TPersist, To: pid.Dir(), PID: pid, Epoch: p.seq}, n.cache.Page(p.f))
		return
	}
	buf := n.getBuf()
	copy(buf, n.cache.Page(p.f))
	seq := p.seq
	n.writeSSD(pid, buf, 0, func() {
		n.putBuf(buf)
		n.whenDurable(func() { n.persistDone(pid, seq, false) })
	})
}

// whenDurable runs fn once the store writes completed so far are durable:
// at once, or after the runtime's flush of the device's cache (SetFlush,
// durability sync).
func (n *Node) whenDurable(fn func()) {
	if n.flush == nil {
		fn()
		return
	}
	n.flush(fn)
}

// SetFlush makes write-throughs wait for flush, which runs its argument
// (under the node's lock) once the writes completed before the call are
// durable on the device (a group commit).
func (n *Node) SetFlush(flush func(fn func())) { n.flush = flush }

// onPersist writes a page written through by its exclusive holder and
// acknowledges it. The directory's metadata does not change: the holder
// keeps its copy, and the SSD copy is now as new as it.
func (n *Node) onPersist(m *protocol.Message, payload []byte) {
	if n.dir.Meta(m.PID) == nil {
		n.violation("%v for a page this directory does not have", *m)
		return
	}
	buf := n.getBuf()
	copy(buf, payload)
	to, pid, seq := m.From, m.PID, m.Epoch
	n.writeSSD(pid, buf, 0, func() {
		n.putBuf(buf)
		n.whenDurable(func() {
			n.send(protocol.Message{Type: protocol.TPersistAck, To: to, PID: pid, Epoch: seq}, nil)
		})
	})
}

// persistDone wakes the worker whose write-through seq of pid completed
// (or, failed, can no longer complete).
func (n *Node) persistDone(pid protocol.PID, seq uint32, failed bool) {
	for i, p := range n.persists {
		if p.seq == seq && p.f.PID == pid {
			n.persists = append(n.persists[:i], n.persists[i+1:]...)
			p.done, p.failed = true, failed
			if !failed && p.acked != nil {
				p.acked()
			}
			p.w.P.Wake()
			return
		}
	}
	n.violation("write-through of %v (seq %d) acknowledged, but no worker waits for it", pid, seq)
}

// Crash makes the node dead: it sends nothing and handles nothing more,
// its storage completions and timers do nothing, and every valid copy it
// held is gone (the observer hears of each).
func (n *Node) Crash() {
	for i := range n.cache.Frames() {
		f := n.cache.Frame(i)
		if n.cache.Lookup(f.PID) != f {
			continue
		}
		if f.Mode != protocol.ModeNone && !f.Evicting {
			n.obs.CopyChanged(n.id, f.PID, f.Mode, protocol.ModeNone, nil)
		}
	}
	n.dead, n.stopped = true, true
	n.persists = nil
}

// Dead reports whether the node crashed.
func (n *Node) Dead() bool { return n.dead }

// Fence aborts everything the node had under way in the view that ends (a
// crash or a restart of another node; the caller has dropped every message
// in flight): outstanding requests (their workers wake and ask again),
// transfers queued on frames, evictions, messages to itself, and storage
// completions still to come (they land, but their callbacks do nothing).
// Copies of pages whose directory is in down are given up: unlatched ones
// at once, latched ones when their latch is released. A write-through to a
// directory in down fails; any other is sent again. The valid copies left
// are what the node reports to the directories' Rebuild. failed, when not
// nil, hears at once of each worker whose write-through failed (the worker
// itself learns it only when it next runs).
func (n *Node) Fence(down protocol.NodeSet, failed func(w *bufmgr.Worker)) {
	n.gen++
	n.local = n.local[:0]
	for _, d := range n.batchDirs {
		n.batches[d] = n.batches[d][:0]
	}
	n.batchDirs = n.batchDirs[:0]
	n.evicting = 0
	for i := range n.cache.Frames() {
		f := n.cache.Frame(i)
		if n.cache.Lookup(f.PID) != f {
			continue
		}
		f.Slow()
		*n.cache.Queue(f) = (*n.cache.Queue(f))[:0]
		if f.Evicting && n.cfg.Mutations.ResurrectEvicting != nil && n.cfg.Mutations.ResurrectEvicting() {
			f.Evicting = false // mutation: the copy counts as valid again
			if f.Mode != protocol.ModeNone {
				n.obs.CopyChanged(n.id, f.PID, protocol.ModeNone, f.Mode, n.copyData(f))
			}
		}
		if f.Evicting {
			// The directory may have accepted the eviction already and let
			// a writer in without invalidating this copy: it is gone
			// (startEvict reported it so). Its page is on the SSD: every
			// write was written through before its latch was released.
			f.Evicting = false
			f.Mode = protocol.ModeNone
		}
		f.Pending, f.AwaitResp, f.AwaitData, f.AwaitAcks, f.ReqEpoch, f.Served = protocol.ModeNone, false, false, 0, 0, 0
		keep := n.cfg.Mutations.KeepDeadPages != nil && n.cfg.Mutations.KeepDeadPages()
		if down.Has(f.PID.Dir()) && f.Mode != protocol.ModeNone && !keep {
			n.obs.CopyChanged(n.id, f.PID, f.Mode, protocol.ModeNone, nil)
			f.Mode = protocol.ModeNone
			n.cache.DropEntitlements(f)
			if !f.Latch.Free() {
				n.voids = append(n.voids, f)
				n.cache.Changed(f)
				continue
			}
		}
		if f.Mode == protocol.ModeNone && f.Latch.Free() {
			n.cache.DropEntitlements(f)
			n.cache.Invalidate(f) // frees it, or wakes its waiters to ask again
			continue
		}
		n.cache.Changed(f)
	}
	// Allocations on other directories: the replies of the old view are
	// dropped, so none is waited for any more.
	for d := range n.allocWait {
		for _, aw := range n.allocWait[d] {
			aw.done, aw.full, aw.cut = true, true, true
			aw.w.P.Wake()
		}
		n.allocWait[d] = nil
	}
	waits := n.persists
	n.persists = nil
	for _, p := range waits {
		if down.Has(p.f.PID.Dir()) {
			if failed != nil {
				failed(p.w)
			}
			p.done, p.failed = true, true
			p.w.P.Wake()
			continue
		}
		n.persists = append(n.persists, p)
		n.issuePersist(p)
	}
	n.drain()
}

// dropVoid drops f if a view change took it away while it was latched
// (Fence) and its latch is free now.
func (n *Node) dropVoid(f *bufmgr.Frame) {
	for i, v := range n.voids {
		if v != f {
			continue
		}
		if f.Latch.Free() && f.Mode == protocol.ModeNone {
			n.voids = append(n.voids[:i], n.voids[i+1:]...)
			n.cache.Invalidate(f)
		}
		return
	}
}

// Holding is the mode in which the node holds a valid copy of pid, for
// the directories' Rebuild after Fence.
func (n *Node) Holding(pid protocol.PID) protocol.Mode {
	f := n.cache.Lookup(pid)
	if f == nil || f.Evicting || f.Pending != protocol.ModeNone {
		return protocol.ModeNone
	}
	return f.Mode
}

// Rebuilt tells the node that its copy of pid counts from epoch on (the
// directory's Rebuild).
func (n *Node) Rebuilt(pid protocol.PID, epoch uint32) {
	if f := n.cache.Lookup(pid); f != nil && f.Mode != protocol.ModeNone {
		f.Epoch = epoch
	}
}
