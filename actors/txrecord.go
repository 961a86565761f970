package actors

import (
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Records of cluster transactions (docs/transactions.md, "Durability").
//
// A commit that changed several pages writes them through one by one, to
// different directories. A process that dies between two of those writes
// would leave some pages new and others old on the stores. So before the
// first write-through, the committer keeps the commit's record (every
// changed page's new image) in its own memory and sends a copy to a buddy
// (another member of the view), which acknowledges it whole. The
// write-throughs follow; the committer then drops the buddy's copy
// (acknowledged) and only then releases its latches. The record is rolled
// forward, during a view change and before the pages are served again:
//
//   - by the buddy, when the committer left the view: every page of the
//     record goes to its directory (TTxRoll);
//   - by the committer, for the pages whose directory left the view while
//     the commit wrote them through: when that directory is back.
//
// A roll is sent in ChangeView before the node reports its holdings, so
// it reaches the page's directory (same connection) before that
// directory can rebuild and serve the view; the directory handles it
// first among the frames it held. Until then nobody could read the page:
// its writer held it latched, then its directory was down, or its
// directory waits for the view. A page of a record cannot have been
// written by anybody else meanwhile: the committer held every page of it
// latched until the buddy dropped the record.
//
// With replicated directories (docs/replication.md) a roll is a
// write-through like any other: it goes to the directory's current
// primary (the route of the view that begins), which writes it to its
// backup too before it acknowledges, and holds the page's requests until
// then (HoldOrphans). A directory whose primary died needs no roll: its
// write-through, cut by the view change, goes again to the new primary
// (Fence); only a directory that lost every copy is rolled when back.
// The committer that left is told by the nodes gone from the view, not
// the directories out of reach (with replicas, none).
//
// This covers the death of any one process (the committer, the buddy or
// a directory): a second death before the roll forward is acknowledged
// may leave half a transaction. A crash of every node at once is covered
// by the committer's copy of the record on its disk (the root package's
// txfile.go), rolled at its restart when every process of its last view
// died (membership.Restart, TxRestartRolls): the record here is then
// gone with the processes.
//
// A roll that reaches a primary while it catches its directory up from
// the holder of the current copies is held until the pushed pages are
// written (Local.holdRoll): a pushed page written after it would undo it.

// txPage is one page of a record.
type txPage struct {
	pid  protocol.PID
	data []byte
	// roll: the page must be written to its directory (its writer or its
	// directory left a view before the write was known durable); rolling
	// is the roll in flight (its ack's Epoch), acked once durable.
	roll    bool
	rolling uint32
	acked   bool
}

// txRecord is a commit's record, on its committer (mine) or its buddy.
type txRecord struct {
	committer protocol.NodeID
	id        uint32
	pages     []txPage
	mine      bool
	// open: the committer has not finished: mine, until TxFinish; a
	// buddy's, until its drop or the committer's death.
	open     bool
	complete bool // buddy: the last page arrived
	// restart: read from this node's disk at its restart, after every
	// process of its last view died (TxRestartRolls).
	restart bool
}

// txWait is a worker waiting for a TTxAck of a record or a drop.
type txWait struct {
	w      *bufmgr.Worker
	id     uint32
	done   bool
	failed bool
}

// txRolled names a roll a directory wrote, so that one sent again (its
// ack was cut by a view change) is not written over a later write.
type txRolled struct {
	from protocol.NodeID
	seq  uint32
	pid  protocol.PID
}

// txRecords is a node's transaction records.
type txRecords struct {
	seq     uint32
	records []*txRecord
	waits   []*txWait
	rolled  [256]txRolled
	next    int
}

// txFind is the index of the open record id of committer, or -1. A
// record whose committer died is not open: a new incarnation of the
// committer numbers its records from 1 again.
func (n *Node) txFind(committer protocol.NodeID, id uint32) int {
	for i, r := range n.txr.records {
		if r.committer == committer && r.id == id && r.open {
			return i
		}
	}
	return -1
}

func (n *Node) txRemove(i int) {
	n.txr.records = append(n.txr.records[:i], n.txr.records[i+1:]...)
}

func (n *Node) txNext() uint32 {
	n.txr.seq++
	if n.txr.seq == 0 {
		n.txr.seq++
	}
	return n.txr.seq
}

// txWaitFor parks w until the TTxAck of id, or a view change; it reports
// whether the ack came.
func (n *Node) txWaitFor(w *bufmgr.Worker, id uint32) bool {
	tw := &txWait{w: w, id: id}
	n.txr.waits = append(n.txr.waits, tw)
	for !tw.done {
		w.P.Park()
	}
	return !tw.failed
}

// TxRecord keeps the new images of the pages fs (latched exclusively by
// w, about to be written through) as a record of this node, and, with
// hasBuddy, sends a copy to buddy and waits for its acknowledgement. It
// returns the record's id, and whether the buddy has it whole (it tries
// again after a view change while the buddy is in the view). Called with
// the node lock held on the real runtime.
func (n *Node) TxRecord(w *bufmgr.Worker, fs []*bufmgr.Frame, buddy protocol.NodeID, hasBuddy bool) (uint32, bool) {
	id := n.txNext()
	r := &txRecord{committer: n.id, id: id, mine: true, open: true}
	for _, f := range fs {
		r.pages = append(r.pages, txPage{pid: f.PID, data: append([]byte(nil), n.cache.Page(f)...)})
	}
	n.txr.records = append(n.txr.records, r)
	if !hasBuddy {
		return id, false
	}
	for !n.dead && !n.stopped && n.members.Has(buddy) {
		for i, p := range r.pages {
			m := protocol.Message{Type: protocol.TTxRecord, To: buddy, PID: p.pid, Epoch: id}
			if i == len(r.pages)-1 {
				m.Flags = protocol.FlagLast
			}
			n.send(m, p.data)
		}
		if n.txWaitFor(w, id) {
			return id, true
		}
	}
	return id, false
}

// TxFinish ends the commit of record id (its pages are written through,
// or failed): the buddy's copy is dropped (acknowledged, tried again
// after a view change while the buddy is in the view), and this node's
// copy is kept only for the pages a view change marked to roll forward.
// Call it before the pages' latches are released.
func (n *Node) TxFinish(w *bufmgr.Worker, id uint32, buddy protocol.NodeID, hasBuddy bool) {
	if i := n.txFind(n.id, id); i >= 0 {
		r := n.txr.records[i]
		r.open = false
		if r.rolledAll() {
			n.txRemove(i)
		}
	}
	if !hasBuddy {
		return
	}
	for !n.dead && !n.stopped && n.members.Has(buddy) {
		n.send(protocol.Message{Type: protocol.TTxDrop, To: buddy, Epoch: id}, nil)
		if n.txWaitFor(w, id) {
			return
		}
	}
}

// rolledAll reports whether every page of r that must roll forward did.
func (r *txRecord) rolledAll() bool {
	for _, p := range r.pages {
		if p.roll && !p.acked {
			return false
		}
	}
	return true
}

func (n *Node) onTxRecord(m *protocol.Message, payload []byte) {
	i := n.txFind(m.From, m.Epoch)
	var r *txRecord
	if i < 0 {
		r = &txRecord{committer: m.From, id: m.Epoch, open: true}
		n.txr.records = append(n.txr.records, r)
	} else {
		r = n.txr.records[i]
		if r.complete { // sent again after a view change cut the ack
			r.pages, r.complete = r.pages[:0], false
		}
	}
	r.pages = append(r.pages, txPage{pid: m.PID, data: append([]byte(nil), payload...)})
	if m.Flags&protocol.FlagLast != 0 {
		r.complete = true
		n.send(protocol.Message{Type: protocol.TTxAck, To: m.From, Epoch: m.Epoch}, nil)
	}
}

func (n *Node) onTxDrop(m *protocol.Message) {
	if i := n.txFind(m.From, m.Epoch); i >= 0 {
		n.txRemove(i)
	}
	n.send(protocol.Message{Type: protocol.TTxAck, To: m.From, Epoch: m.Epoch}, nil)
}

// onTxRoll writes a record's page to this directory's store (and, with a
// backup, to the backup's, as any write-through: docs/replication.md) and
// acknowledges it once durable. A roll written already (sent again after
// a view change cut its ack) is acknowledged without writing: the page
// may have been written since.
func (n *Node) onTxRoll(m *protocol.Message, payload []byte) {
	key := txRolled{from: m.From, seq: m.Epoch, pid: m.PID}
	for _, k := range n.txr.rolled {
		if k == key {
			n.send(protocol.Message{Type: protocol.TTxAck, To: m.From, PID: m.PID, Epoch: m.Epoch}, nil)
			return
		}
	}
	if n.route[m.PID.Dir()] != n.id || n.dirOf(m.PID).Meta(m.PID) == nil {
		n.violation("%v for a page this directory does not have", *m)
		return
	}
	n.txr.rolled[n.txr.next] = key
	n.txr.next = (n.txr.next + 1) % len(n.txr.rolled)
	if n.hasBackup.Has(m.PID.Dir()) {
		n.forward(m.From, m.PID, payload, m.Epoch).roll = true
		return
	}
	n.writeAndAck(payload, protocol.Message{Type: protocol.TTxAck, To: m.From, PID: m.PID, Epoch: m.Epoch})
}

func (n *Node) onTxAck(m *protocol.Message) {
	for i, tw := range n.txr.waits {
		if tw.id == m.Epoch {
			n.txr.waits = append(n.txr.waits[:i], n.txr.waits[i+1:]...)
			tw.done = true
			tw.w.P.Wake()
			return
		}
	}
	n.txRollDone(m.PID, m.Epoch)
}

// txRollDone marks the roll seq of pid durable.
func (n *Node) txRollDone(pid protocol.PID, seq uint32) {
	for i, r := range n.txr.records {
		for j := range r.pages {
			p := &r.pages[j]
			if p.pid != pid || p.rolling != seq || seq == 0 {
				continue
			}
			p.acked, p.rolling = true, 0
			if !r.open && r.rolledAll() {
				n.txRemove(i)
			}
			return
		}
	}
}

// TxViewChange rolls records forward in the view that begins (gone: the
// nodes gone or restarted since the previous one; down: the directories
// out of reach, the same nodes with one replica, those that lost every
// copy with replicas), after Fence and before the node reports its
// holdings: waits for acks fail (the old view's messages are dropped), a
// buddy's incomplete record is dropped (its commit wrote nothing through
// yet), a buddy whose committer is gone rolls every page of its record, a
// committer every page whose directory is down; each such page is sent to
// its directory's current primary as soon as that one is in the view
// (again, if the ack of an earlier roll was cut). It reports the rolls
// sent.
func (n *Node) TxViewChange(gone, down protocol.NodeSet) int {
	waits := n.txr.waits
	n.txr.waits = nil
	for _, tw := range waits {
		tw.done, tw.failed = true, true
		tw.w.P.Wake()
	}
	sent := 0
	kept := n.txr.records[:0]
	for _, r := range n.txr.records {
		if !r.mine && !r.complete {
			continue
		}
		for j := range r.pages {
			p := &r.pages[j]
			if (!r.mine && gone.Has(r.committer)) || (r.mine && down.Has(p.pid.Dir())) {
				p.roll = true
			}
			if !p.roll || p.acked {
				continue
			}
			to := n.route[p.pid.Dir()]
			if !n.members.Has(to) || n.lostDirs[p.pid.Dir()] != nil {
				continue // when its directory is back
			}
			p.rolling = n.txNext()
			sent++
			if to == n.id {
				if n.holdOwnRoll == nil || !n.holdOwnRoll(p.pid, p.data, p.rolling) {
					n.rollOwn(p.pid, p.data, p.rolling)
				}
				continue
			}
			n.send(protocol.Message{Type: protocol.TTxRoll, To: to, PID: p.pid, Epoch: p.rolling}, p.data)
		}
		if !r.mine && gone.Has(r.committer) {
			r.open = false // nobody will drop it: it ends when rolled
		}
		if !r.open && r.rolledAll() {
			continue
		}
		kept = append(kept, r)
	}
	clear(n.txr.records[len(kept):])
	n.txr.records = kept
	return sent
}

// rollOwn writes roll seq of pid, a page of a directory this node
// serves (and to its backup, with one).
func (n *Node) rollOwn(pid protocol.PID, data []byte, seq uint32) {
	if n.hasBackup.Has(pid.Dir()) {
		n.forward(n.id, pid, data, seq).roll = true
		return
	}
	n.writeDurable(pid, data, func() { n.txRollDone(pid, seq) })
}

// TxRecords is how many transaction records the node keeps (its own and
// those it is the buddy of).
func (n *Node) TxRecords() int { return len(n.txr.records) }

// TxRecord is Node.TxRecord on the real runtime, for the pages gs latch
// exclusively for w. The buddy is a member of the view other than this
// node, the directory of one of the pages if it can. Without views (no
// membership) nothing is recorded: no view change would roll it forward.
func (l *Local) TxRecord(w *bufmgr.Worker, gs []*bufmgr.ExclusiveGuard) (id uint32, buddy protocol.NodeID, ok bool) {
	if !l.views.Load() {
		return 0, 0, false
	}
	fs := make([]*bufmgr.Frame, len(gs))
	for i, g := range gs {
		fs[i] = g.Frame()
	}
	l.Locked(func() {
		self := l.node.ID()
		found := false
		for _, f := range fs {
			if d := l.node.route[f.PID.Dir()]; d != self && l.vs.members.Has(d) {
				buddy, found = d, true
				break
			}
		}
		if !found {
			l.vs.members.Each(func(d protocol.NodeID) {
				if !found && d != self {
					buddy, found = d, true
				}
			})
		}
		id, ok = l.node.TxRecord(w, fs, buddy, found)
		ok = found // the record is kept here either way; TxFinish drops the buddy's copy if it has one
	})
	return id, buddy, ok
}

// TxFinish is Node.TxFinish on the real runtime; id 0 (nothing recorded)
// does nothing.
func (l *Local) TxFinish(w *bufmgr.Worker, id uint32, buddy protocol.NodeID, hasBuddy bool) {
	if id == 0 {
		return
	}
	l.Locked(func() { l.node.TxFinish(w, id, buddy, hasBuddy) })
}

// TxRecords is Node.TxRecords under the node's lock.
func (l *Local) TxRecords() int {
	var k int
	l.Locked(func() { k = l.node.TxRecords() })
	return k
}
