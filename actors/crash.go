package actors

import (
	"errors"

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

// persistWait is a worker waiting for its write-through (or, replicate,
// for the copy of a page to a new backup).
type persistWait struct {
	w      *bufmgr.Worker
	acked  func()
	f      *bufmgr.Frame
	pid    protocol.PID
	seq    uint32
	done   bool
	failed bool
	// need: the acknowledgements still awaited before the write is
	// durable: 1, or 2 when this node is the backup of the page's
	// directory and writes its own copy beside the primary's
	// (issuePersist).
	need int
	// replicate: a copy of data to node to only (Replicate).
	replicate bool
	to        protocol.NodeID
	data      []byte
}

// Persist writes the page of f, which w holds exclusively, through to its
// directory's SSD and waits for it to be there. It reports false when the
// page's directory crashed first: the write may or may not be on its SSD,
// and the copy is gone (the caller releases the guard and reports the
// write as indeterminate). acked, when not nil, is called the moment the
// acknowledgement is handled, before w runs again: from then on the write
// is durable, whenever w gets the CPU. Called with the node lock held on
// the real runtime (Local.Persist: w parks without it). With a backup
// (docs/replication.md), the page goes to the primary and the backup at
// once, and the write is durable when both acknowledged it.
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
	p := &persistWait{w: w, f: f, pid: f.PID, acked: acked}
	n.persists = append(n.persists, p)
	n.issuePersist(p)
	for !p.done {
		w.P.Park()
	}
	return !p.failed
}

// Replicate copies data, the page pid as w holds it (shared at least, so
// no write-through of it can be under way), to node to's store of pid's
// directory, and waits for the acknowledgement: re-replication to a new
// backup (docs/replication.md, decision 4). It reports false when a view
// change came first (the copy may or may not have landed).
func (n *Node) Replicate(w *bufmgr.Worker, pid protocol.PID, data []byte, to protocol.NodeID) bool {
	p := &persistWait{w: w, pid: pid, replicate: true, to: to, data: data}
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
		p := &persistWait{w: w, f: f, pid: f.PID}
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
	pid := p.pid
	if p.replicate {
		n.send(protocol.Message{Type: protocol.TPersist, To: p.to, PID: pid, Epoch: p.seq}, p.data)
		return
	}
	p.need = 1
	if to := n.route[pid.Dir()]; to != n.id {
		if n.keepsBackup(pid.Dir()) {
			// This node keeps the directory's second copy: it writes it
			// itself while the primary writes the first, and the primary,
			// which sees the write-through come from its backup, forwards
			// nothing (onPersist). One round trip, as with one replica,
			// where the primary's forward would come back here.
			p.need = 2
			seq := p.seq
			n.writeDurable(pid, n.cache.Page(p.f), func() { n.persistDone(pid, seq, n.id) })
		}
		m := protocol.Message{Type: protocol.TPersist, To: to, PID: pid, Epoch: p.seq}
		if p.need == 2 {
			m.Flags = protocol.FlagOwnCopy
		}
		n.send(m, n.cache.Page(p.f))
		return
	}
	if n.hasBackup.Has(pid.Dir()) {
		n.forward(n.id, pid, n.cache.Page(p.f), p.seq)
		return
	}
	seq := p.seq
	n.writeDurable(pid, n.cache.Page(p.f), func() { n.persistDone(pid, seq, n.id) })
}

// forwardWait is a write-through at a primary with a backup: the page is
// written to the primary's store and to the backup's (docs/replication.md,
// decision 2), and the writer is acknowledged when both have it. orphan:
// its writer no longer waits (a view change came between); the page's
// requests are held at the directory until the backup has it, so that no
// reader sees a value only one replica holds.
type forwardWait struct {
	pid    protocol.PID
	writer protocol.NodeID
	seq    uint32 // the writer's
	fseq   uint32 // the backup's acknowledgement carries it
	page   []byte
	need   int
	acked  bool // the writer was acknowledged
	orphan bool
	held   bool
	// roll: a transaction record's roll forward (txrecord.go), acked
	// with TTxAck; its page is held as an orphan's until the backup has it.
	roll bool
}

// forward writes page (pid, written through by writer with seq) to this
// node's store and to the backup of pid's directory.
func (n *Node) forward(writer protocol.NodeID, pid protocol.PID, page []byte, seq uint32) *forwardWait {
	fw := &forwardWait{pid: pid, writer: writer, seq: seq, page: make([]byte, protocol.PageSize)}
	copy(fw.page, page)
	n.forwards = append(n.forwards, fw)
	n.issueForward(fw)
	return fw
}

func (n *Node) issueForward(fw *forwardWait) {
	n.persistSeq++
	fw.fseq, fw.need = n.persistSeq, 2
	fseq := fw.fseq
	n.writeDurable(fw.pid, fw.page, func() { n.forwardDone(fw.pid, fseq, n.id) })
	n.send(protocol.Message{Type: protocol.TPersist, To: n.backups[fw.pid.Dir()], PID: fw.pid, Epoch: fw.fseq}, fw.page)
}

// forwardDone counts an acknowledgement (this node's store's, or the
// backup's) of the forward fseq of pid; false if there is no such forward.
func (n *Node) forwardDone(pid protocol.PID, fseq uint32, from protocol.NodeID) bool {
	for i, fw := range n.forwards {
		if fw.fseq != fseq || fw.pid != pid {
			continue
		}
		fw.need--
		if fw.need > 0 {
			if from == n.id && !fw.orphan && n.cfg.Mutations.AckBeforeBackup != nil && n.cfg.Mutations.AckBeforeBackup() {
				n.ackWriter(fw) // mutation: acknowledged while the backup may not have it
			}
			return true
		}
		n.forwards = append(n.forwards[:i], n.forwards[i+1:]...)
		if !fw.orphan {
			n.ackWriter(fw)
		}
		if fw.held && !n.holdsForward(pid) {
			if d := n.hosted[pid.Dir()]; d != nil && n.route[pid.Dir()] == n.id {
				if err := d.Unhold(pid); err != nil {
					n.violation("%v", err)
				}
				n.resumeParked(pid)
			}
		}
		return true
	}
	return false
}

func (n *Node) ackWriter(fw *forwardWait) {
	if fw.acked {
		return
	}
	fw.acked = true
	if fw.roll && fw.writer == n.id {
		n.txRollDone(fw.pid, fw.seq)
		return
	}
	if fw.roll {
		n.send(protocol.Message{Type: protocol.TTxAck, To: fw.writer, PID: fw.pid, Epoch: fw.seq}, nil)
		return
	}
	if fw.writer == n.id {
		n.persistDone(fw.pid, fw.seq, n.id)
		return
	}
	n.send(protocol.Message{Type: protocol.TPersistAck, To: fw.writer, PID: fw.pid, Epoch: fw.seq}, nil)
}

// keepsBackup reports whether this node keeps the second copy of
// directory dir's pages in the current view (and is not its primary).
func (n *Node) keepsBackup(dir protocol.NodeID) bool {
	return n.hasBackup.Has(dir) && n.backups[dir] == n.id && n.route[dir] != n.id && n.pageIO[dir] != nil
}

// holdsForward reports whether an orphan forward of pid is still under way.
func (n *Node) holdsForward(pid protocol.PID) bool {
	for _, fw := range n.forwards {
		if fw.pid == pid && fw.held {
			return true
		}
	}
	return false
}

// HoldOrphans holds, at the directories this node serves, the requests for
// every page whose forward to the backup a view change cut (Fence re-sent
// it), or that a transaction's roll forward writes: called once the
// directories are rebuilt, it keeps readers from a value that only this
// node's store holds until the backup has it too.
func (n *Node) HoldOrphans() {
	for _, fw := range n.forwards {
		if !fw.orphan && !fw.roll {
			continue
		}
		d := n.hosted[fw.pid.Dir()]
		if d == nil || n.route[fw.pid.Dir()] != n.id {
			continue
		}
		if !n.holdsForward(fw.pid) {
			if err := d.Hold(fw.pid); err != nil {
				n.violation("%v", err)
				continue
			}
		}
		fw.held = true
	}
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

// onPersist writes a page written through by its exclusive holder (or
// copied by re-replication) and acknowledges it. The directory's metadata
// does not change: the holder keeps its copy, and the SSD copy is now as
// new as it. The node takes it as the primary that serves the page's
// directory, or as the backup that keeps its copy.
func (n *Node) onPersist(m *protocol.Message, payload []byte) {
	dir := m.PID.Dir()
	served := n.route[dir] == n.id && n.dirOf(m.PID).Meta(m.PID) != nil
	backup := n.hasBackup.Has(dir) && n.backups[dir] == n.id && n.pageIO[dir] != nil
	if !served && !backup {
		n.violation("%v for a page this directory does not have", *m)
		return
	}
	if served && n.hasBackup.Has(dir) && (m.Flags&protocol.FlagOwnCopy == 0 || m.From != n.backups[dir]) {
		n.forward(m.From, m.PID, payload, m.Epoch)
		return
	}
	// Served without a backup, kept as the backup, or served and written
	// through by the backup itself, which writes its own copy
	// (issuePersist): this store only.
	n.writeAndAck(payload, protocol.Message{Type: protocol.TPersistAck, To: m.From, PID: m.PID, Epoch: m.Epoch})
}

// writeAndAck writes payload to ack.PID's slot of this node's store and
// sends ack once it is durable (a write-through, a catch-up page, a
// transaction's roll).
func (n *Node) writeAndAck(payload []byte, ack protocol.Message) {
	n.writeDurable(ack.PID, payload, func() { n.send(ack, nil) })
}

// writeDurable writes a copy of page to pid's slot of this node's store
// (its own, or the replica store of pid's directory) and runs done once
// the write is durable. The copy is the write's: the caller's page may
// change as soon as this returns.
func (n *Node) writeDurable(pid protocol.PID, page []byte, done func()) {
	buf := n.getBuf()
	copy(buf, page)
	n.writeSSD(pid, buf, 0, func() {
		n.putBuf(buf)
		n.whenDurable(done)
	})
}

// persistDone counts an acknowledgement from node from of the
// write-through seq of pid (or of a forward to the backup, at a primary),
// and wakes its worker once it is durable.
func (n *Node) persistDone(pid protocol.PID, seq uint32, from protocol.NodeID) {
	if len(n.forwards) > 0 && n.forwardDone(pid, seq, from) {
		return
	}
	for i, p := range n.persists {
		if p.seq != seq || p.pid != pid {
			continue
		}
		if p.need--; p.need > 0 {
			if from != n.id && n.cfg.Mutations.AckBeforeBackup != nil && n.cfg.Mutations.AckBeforeBackup() {
				p.need = 0 // mutation: the primary's ack releases the write before this backup's own copy is written
			} else {
				return
			}
		}
		n.persists = append(n.persists[:i], n.persists[i+1:]...)
		n.release(p, false)
		return
	}
	n.violation("write-through of %v (seq %d) acknowledged, but no worker waits for it", pid, seq)
}

// release lets the worker of p go on: the write is durable (or, failed,
// its outcome unknown).
func (n *Node) release(p *persistWait, failed bool) {
	p.done, p.failed = true, failed
	if !failed && p.acked != nil {
		p.acked()
	}
	p.w.P.Wake()
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
	n.persists, n.forwards = nil, nil
}

// dirOf is the directory that decides for pid on this node: the one it
// hosts for pid's directory, or its own (which refuses a page it does not
// have, ErrNotOurs).
func (n *Node) dirOf(pid protocol.PID) *protocol.Directory {
	if d := n.hosted[pid.Dir()]; d != nil {
		return d
	}
	return n.dir
}

// ErrDirectoryMoved: an allocation on a directory whose primary failed
// over to its backup (not built: docs/replication.md).
var ErrDirectoryMoved = errors.New("the directory failed over to its backup: allocating on it is not built")

// SetRoute places directory dir in the view that begins: primary serves
// its pages, and backup, when hasBackup, keeps a copy of each
// (protocol.Placement; docs/replication.md). Requests, evictions and
// write-throughs of dir's pages go there from now on.
func (n *Node) SetRoute(dir, primary, backup protocol.NodeID, hasBackup bool) {
	n.route[dir], n.backups[dir] = primary, backup
	if hasBackup {
		n.hasBackup.Add(dir)
	} else {
		n.hasBackup.Remove(dir)
	}
}

// Host makes the node serve directory dir from d (a promoted backup), or,
// with d nil, stop serving it. A node always hosts its own.
func (n *Node) Host(dir protocol.NodeID, d *protocol.Directory) {
	if dir == n.id {
		return
	}
	n.hosted[dir] = d
}

// SetLost marks directory dir as lost (err, which wraps ErrDirectoryDown
// and names the nodes that held its copies): every node that held its
// current copies is out of the view, so its pages fail at once
// (Reachable) until one returns; SetLost(dir, nil) clears it.
func (n *Node) SetLost(dir protocol.NodeID, err error) { n.lostDirs[dir] = err }

// Hosted is the directory the node serves for dir's pages, nil if none.
func (n *Node) Hosted(dir protocol.NodeID) *protocol.Directory { return n.hosted[dir] }

// SetPageIO gives the node its store of directory dir's pages (dir is not
// the node itself): the copies it keeps as dir's backup, and serves from as
// its promoted primary.
func (n *Node) SetPageIO(dir protocol.NodeID, io PageIO) { n.pageIO[dir] = io }

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
	// Forwards to a backup (this node is a primary): their writers ask
	// again if they are alive; the copies are made whole all the same,
	// to the new view's backup, if this node still serves the directory.
	fws := n.forwards
	n.forwards = nil
	for _, fw := range fws {
		if n.route[fw.pid.Dir()] != n.id || !n.hasBackup.Has(fw.pid.Dir()) {
			continue
		}
		fw.orphan, fw.held = true, false
		n.forwards = append(n.forwards, fw)
		n.issueForward(fw)
	}
	waits := n.persists
	n.persists = nil
	for _, p := range waits {
		if p.replicate {
			n.release(p, true) // re-replication starts over in the new view
			continue
		}
		if down.Has(p.pid.Dir()) {
			if failed != nil {
				failed(p.w)
			}
			n.release(p, true)
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
