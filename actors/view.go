package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

// View changes on real processes (docs/durability.md, "View changes").
//
// The simulator's coordinator changes views in one atomic step: it drops
// every message in flight, fences every live node, and rebuilds every
// directory from the copies the nodes hold. Processes cannot stop the
// world, so the same steps are spread over the nodes, each keyed by the
// view number every frame carries:
//
//  1. A node learns of view v (its membership service: etcd) and installs
//     it (ChangeView): from then on it stamps v on what it sends, drops
//     what arrives stamped with an older view (the old view's messages in
//     flight: the sim's DropMessages), and holds what arrives stamped
//     with a newer one until it installs that view. It fences (Node.Fence:
//     outstanding requests forgotten, copies of the pages of nodes that
//     left given up) and reports to every directory of v the copies of its
//     pages it still holds (THoldings).
//  2. It is gated meanwhile: it handles none of v's protocol messages, its
//     own directory's included, and evicts nothing, so its copies stay as
//     it reported them. Its workers run: they use the copies they hold,
//     and what they ask for waits at the directory.
//  3. A directory that has every member's report rebuilds the metadata of
//     each of its pages (protocol.Directory.Rebuild) and tells each holder
//     from which epoch its copies count (TRebuilt, the last one flagged).
//  4. A node that has the answer of every directory of v is active in v:
//     it handles the messages it held, and the protocol goes on.
//
// A node in v handles v's protocol messages only once every directory of v
// rebuilt, so no directory serves from metadata older than the view. A
// report is taken after the node stopped handling the old view's messages,
// so the reports of one page agree (one exclusive holder, or sharers): the
// protocol's single-writer invariant holds for each message handled, and
// no message crosses from one view to the next.

// ErrDirectoryDown: the page's directory, a node out of the membership
// view, cannot be asked for it. The access fails at once; it may succeed
// once the node is back in a later view.
var ErrDirectoryDown = errors.New("the page's directory is down")

// ErrNotInView: this node is not a member of the cluster's current view (it
// was declared dead: paused or cut off longer than its lease). It stops; a
// restart rejoins in a new view.
var ErrNotInView = errors.New("this node is out of the cluster's view")

// ErrLeaseLapsed: this node's membership lease may have expired, so the
// others may have changed the view without it: it serves nothing until it
// learns the view.
var ErrLeaseLapsed = errors.New("this node's membership lease lapsed")

// maxHeld bounds the frames a node holds for a view it has not (fully)
// installed; reaching it means the view change is stuck.
const maxHeld = 1 << 16

type heldFrame struct {
	m       protocol.Message
	payload []byte
}

type holding struct {
	mode    protocol.Mode
	holders protocol.NodeSet
}

// viewState is the view change's state in Local (under the lock).
type viewState struct {
	number  uint32
	members protocol.NodeSet
	active  bool
	held    []heldFrame
	// reported are the members whose holdings this directory has in full,
	// holds what they reported.
	reported protocol.NodeSet
	holds    map[protocol.PID]holding
	// rebuilt are the directories whose rebuild answer arrived in full.
	rebuilt     protocol.NodeSet
	installedAt time.Time
	scratch     []protocol.ViewEntry
	// OnActive, when set, hears of each view the node became active in.
	onActive func(view uint32, took time.Duration)
}

// EnableViews makes the node a member of views (ChangeView): frames carry
// the view number and are checked against it. Call it before the transport
// delivers frames. lease, when not nil, is the instant until which the
// node's membership is certainly valid: an operation fails with
// ErrLeaseLapsed when it starts or ends after it. onActive, when not nil, hears (under the node's lock) of
// each view the node becomes active in and how long the change took.
func (l *Local) EnableViews(lease func() time.Time, onActive func(view uint32, took time.Duration)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vs.active = true // view 0 until the first ChangeView: local work only
	l.vs.members.Add(l.node.ID())
	if lease != nil {
		l.lease.Store(&lease)
	}
	l.vs.onActive = onActive
	l.views.Store(true)
}

// View is the installed view's number and whether the node is active in it.
func (l *Local) View() (number uint32, active bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.vs.number, l.vs.active
}

// ChangeView installs view number with members; down are the nodes of the
// previous view that are gone or came back as new incarnations: copies of
// their pages are given up. A view not newer than the installed one is
// ignored. A view without this node fails it (ErrNotInView).
func (l *Local) ChangeView(number uint64, members, down protocol.NodeSet) error {
	return l.ChangeViewCurrent(number, members, down, nil)
}

// ChangeViewCurrent is ChangeView for a node with replicated directories
// (EnableReplicas): current is the view's record of which nodes hold each
// directory's current copies (membership.View.Current). down is then
// used only for transaction records (a committer that left): only the
// copies of the pages of a directory that lost every current copy are
// given up (docs/replication.md).
func (l *Local) ChangeViewCurrent(number uint64, members, down protocol.NodeSet, current map[protocol.NodeID]protocol.NodeSet) error {
	if number > protocol.MaxView {
		return fmt.Errorf("actors: node %d: view %d is over the frames' %d", l.node.ID(), number, protocol.MaxView)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed.Load() {
		return l.err
	}
	v := uint32(number)
	if v <= l.vs.number {
		return nil
	}
	self := l.node.ID()
	if !members.Has(self) {
		err := fmt.Errorf("actors: node %d: view %d has members %v: %w", self, v, members, ErrNotInView)
		l.fail(err)
		return err
	}
	n := l.node
	l.vs.number, l.vs.members, l.vs.active = v, members, false
	l.vs.reported, l.vs.rebuilt = protocol.NodeSet{}, protocol.NodeSet{}
	l.vs.holds = map[protocol.PID]holding{}
	l.vs.installedAt = time.Now()
	l.dropLogged.Store(false)
	n.gated, n.view = true, v
	n.outside, n.members = protocol.NodeSet{}, members
	// gone: the nodes that left or restarted since the previous view
	// (their transaction records, as committers, roll forward); down
	// becomes the directories out of reach.
	gone := down
	if l.rep != nil {
		// A directory is out of reach only when it lost every current
		// copy (SetLost, place); the others are served by their primary.
		lost, err := l.place(members, current)
		if err != nil {
			l.fail(err)
			return err
		}
		down = lost
	} else {
		for id := range protocol.MaxNodes {
			if !members.Has(protocol.NodeID(id)) {
				n.outside.Add(protocol.NodeID(id))
			}
		}
	}
	n.Fence(down, nil)
	// Transactions' records roll forward before the holdings go out: a
	// directory handles the rolls before it can serve the view.
	n.TxViewChange(gone, down)
	// Report to every other directory what this node holds of its pages;
	// this node's own holdings are read when its directory rebuilds (a
	// page it allocates meanwhile is one). With replicas, to every other
	// member, what it holds of the directories that member serves; to a
	// node this node catches up, only once the pages reached it.
	members.Each(func(d protocol.NodeID) {
		if d != self && (l.rep == nil || !l.rep.deferred.Has(d)) {
			l.sendEntries(protocol.THoldings, d, l.holdingsFor(d))
		}
	})
	if l.rep != nil {
		l.startPushes()
	}
	l.replayHeld()
	l.maybeRebuild()
	return nil
}

// holdingsOf lists the valid copies this node holds of dir's pages.
func (l *Local) holdingsOf(dir protocol.NodeID) []protocol.ViewEntry {
	out := l.vs.scratch[:0]
	c := l.node.Cache()
	for i := range c.Frames() {
		f := c.Frame(i)
		if f.PID.Dir() != dir || c.Lookup(f.PID) != f {
			continue
		}
		if m := l.node.Holding(f.PID); m != protocol.ModeNone {
			out = append(out, protocol.ViewEntry{PID: f.PID, Mode: m})
		}
	}
	l.vs.scratch = out
	return out
}

// sendEntries sends entries to node to in batches, the last flagged.
func (l *Local) sendEntries(t protocol.Type, to protocol.NodeID, entries []protocol.ViewEntry) {
	var buf [protocol.MaxViewBatch * protocol.ViewEntrySize]byte
	for {
		k := min(len(entries), protocol.MaxViewBatch)
		m := protocol.Message{Type: t, From: l.node.ID(), To: to, Count: uint16(k)}
		if k == len(entries) {
			m.Flags = protocol.FlagLast
		}
		protocol.EncodeViewEntries(buf[:], entries[:k])
		l.Send(m, buf[:k*protocol.ViewEntrySize])
		entries = entries[k:]
		if m.Flags&protocol.FlagLast != 0 {
			return
		}
	}
}

// admit decides what to do with a frame of a node that takes part in
// views: drop it (an older view), hold it (a newer view, or this view
// before the node is active in it), or handle it.
func (l *Local) admit(m *protocol.Message, payload []byte) {
	switch {
	case m.View < l.vs.number:
		l.StaleFrames.Add(1)
	case m.View == l.vs.number && m.Flags&protocol.FlagCatchUp != 0 && m.Type == protocol.TPersist:
		l.onCatchUp(m, payload)
	case m.View == l.vs.number && m.Flags&protocol.FlagCatchUp != 0 && m.Type == protocol.TPersistAck:
		l.onCatchUpAck(m)
	case m.View > l.vs.number || (!l.vs.active && m.Type != protocol.THoldings && m.Type != protocol.TRebuilt && m.Type != protocol.TTxRoll):
		if len(l.vs.held) >= maxHeld {
			l.fail(fmt.Errorf("actors: node %d: %d frames wait for view %d to be installed (it was installed %v ago)",
				l.node.ID(), maxHeld, l.vs.number, time.Since(l.vs.installedAt).Round(time.Millisecond)))
			return
		}
		l.vs.held = append(l.vs.held, heldFrame{m: *m, payload: append([]byte(nil), payload...)})
	case m.Type == protocol.THoldings:
		l.onHoldings(m, payload)
	case m.Type == protocol.TRebuilt:
		l.onRebuilt(m, payload)
	case m.Type == protocol.TTxRoll && !l.vs.active && l.holdRoll(m, payload):
		// A directory this node catches up: written after the pushed
		// pages.
	case m.Type == protocol.TTxRoll && !l.vs.active:
		// A transaction's roll forward is written while the view is
		// gated, before this directory serves it (txrecord.go).
		l.sizeForRoll(m.PID.Dir())
		l.node.onTxRoll(m, payload)
	default:
		l.node.Deliver(m, payload)
	}
}

// replayHeld handles the held frames the installed view now admits, in
// the order they came; the others stay held (a newer view) or are dropped
// (an older one).
func (l *Local) replayHeld() {
	held := l.vs.held
	l.vs.held = nil
	number := l.vs.number
	for i := range held {
		h := &held[i]
		if l.failed.Load() {
			return
		}
		if l.vs.number != number {
			l.vs.held = append(l.vs.held, *h) // a view installed meanwhile: keep the rest for it
			continue
		}
		l.admit(&h.m, h.payload)
	}
}

// badViewFrame drops a view change's frame that does not fit (a peer's
// bug or a forged frame): logged and counted, the node goes on.
func (l *Local) badViewFrame(m *protocol.Message, err error) {
	l.BadFrames.Add(1)
	l.log.Error("dropping a bad view-change frame", "node", l.node.ID(), "frame", m.String(), "err", err)
}

func (l *Local) onHoldings(m *protocol.Message, payload []byte) {
	if !l.vs.members.Has(m.From) || l.vs.reported.Has(m.From) {
		l.badViewFrame(m, fmt.Errorf("holdings from node %d, which is not a member of view %d %v or reported already", m.From, l.vs.number, l.vs.members))
		return
	}
	entries, err := protocol.DecodeViewEntriesOf(l.vs.scratch[:0], payload, int(m.Count), l.servedBy(l.node.ID()), true)
	l.vs.scratch = entries
	if err != nil {
		l.badViewFrame(m, err)
		return
	}
	for _, e := range entries {
		if err := l.hold(e.PID, e.Mode, m.From); err != nil {
			l.fail(err)
			return
		}
	}
	if m.Flags&protocol.FlagLast != 0 {
		l.vs.reported.Add(m.From)
		l.maybeRecord(m.From)
		l.maybeRebuild()
	}
}

// hold adds one reported copy; copies that cannot coexist are a violation.
func (l *Local) hold(pid protocol.PID, mode protocol.Mode, by protocol.NodeID) error {
	h := l.vs.holds[pid]
	if h.mode != protocol.ModeNone && (h.mode != mode || mode == protocol.ModeExclusive) {
		return fmt.Errorf("actors: node %d: view %d: page %v is held %v by node %d beside %v by %v: %w",
			l.node.ID(), l.vs.number, pid, mode, by, h.mode, h.holders, protocol.ErrUnexpected)
	}
	h.mode = mode
	h.holders.Add(by)
	l.vs.holds[pid] = h
	return nil
}

// maybeRebuild rebuilds this node's directory once every other member
// reported, and sends each member its answer.
func (l *Local) maybeRebuild() {
	self := l.node.ID()
	others := l.vs.members
	others.Remove(self)
	for i := range others {
		if others[i]&^l.vs.reported[i] != 0 {
			return
		}
	}
	if l.vs.rebuilt.Has(self) {
		return
	}
	if l.rep != nil && l.rep.pendingCatchUp() {
		return // a catch-up is not recorded yet: serve nothing of it
	}
	for _, e := range l.holdingsFor(self) {
		if err := l.hold(e.PID, e.Mode, self); err != nil {
			l.fail(err)
			return
		}
	}
	answers := map[protocol.NodeID][]protocol.ViewEntry{}
	served := l.servedBy(self)
	for i := range protocol.MaxNodes {
		if !served.Has(protocol.NodeID(i)) {
			continue
		}
		dir := l.node.dirOf(protocol.MakePID(protocol.NodeID(i), 0))
		if err := l.growHosted(protocol.NodeID(i), dir); err != nil {
			l.fail(fmt.Errorf("actors: node %d: view %d: directory %d: %w", self, l.vs.number, i, err))
			return
		}
		for slot := range dir.Allocated() {
			pid := protocol.MakePID(protocol.NodeID(i), slot)
			h := l.vs.holds[pid]
			delete(l.vs.holds, pid)
			epoch, err := dir.Rebuild(pid, h.mode, h.holders)
			if err != nil {
				l.fail(fmt.Errorf("actors: node %d: view %d: %w", self, l.vs.number, err))
				return
			}
			h.holders.Each(func(n protocol.NodeID) {
				answers[n] = append(answers[n], protocol.ViewEntry{PID: pid, Epoch: epoch})
			})
		}
	}
	for pid, h := range l.vs.holds {
		l.fail(fmt.Errorf("actors: node %d: view %d: nodes %v reported %v copies of page %v, which this directory never allocated: %w",
			self, l.vs.number, h.holders, h.mode, pid, protocol.ErrUnexpected))
		return
	}
	l.vs.members.Each(func(n protocol.NodeID) {
		if n != self {
			l.sendEntries(protocol.TRebuilt, n, answers[n])
		}
	})
	for _, e := range answers[self] {
		l.node.Rebuilt(e.PID, e.Epoch)
	}
	if l.rep != nil {
		l.node.HoldOrphans()
	}
	l.vs.rebuilt.Add(self)
	l.maybeActivate()
}

func (l *Local) onRebuilt(m *protocol.Message, payload []byte) {
	if !l.vs.members.Has(m.From) || l.vs.rebuilt.Has(m.From) {
		l.badViewFrame(m, fmt.Errorf("rebuild answer from node %d, which is not a member of view %d %v or answered already", m.From, l.vs.number, l.vs.members))
		return
	}
	entries, err := protocol.DecodeViewEntriesOf(l.vs.scratch[:0], payload, int(m.Count), l.servedBy(m.From), false)
	l.vs.scratch = entries
	if err != nil {
		l.badViewFrame(m, err)
		return
	}
	for _, e := range entries {
		l.node.Rebuilt(e.PID, e.Epoch)
	}
	if m.Flags&protocol.FlagLast != 0 {
		l.vs.rebuilt.Add(m.From)
		l.maybeActivate()
	}
}

// maybeActivate makes the node active in its view once every directory of
// the view answered: it handles what it held, in order.
func (l *Local) maybeActivate() {
	if l.vs.rebuilt != l.vs.members || l.vs.active {
		return
	}
	l.vs.active = true
	l.node.gated = false
	if l.vs.onActive != nil {
		l.vs.onActive(l.vs.number, time.Since(l.vs.installedAt))
	}
	l.node.drain()
	l.replayHeld()
	l.node.NeedFrames() // evictions waited for the view change
	l.startRereplication()
}

// leaseValid reports an error when the node's membership lease may have
// lapsed (SetLease): its copies may no longer be coherent.
func (l *Local) leaseValid() error {
	lease := l.lease.Load()
	if lease == nil {
		return nil
	}
	if until := (*lease)(); time.Now().After(until) {
		return fmt.Errorf("actors: node %d: %w %v ago: it serves nothing until it is in a view again", l.node.ID(), ErrLeaseLapsed, time.Since(until).Round(time.Millisecond))
	}
	return nil
}

// Reachable implements bufmgr.Remote: a page whose directory is out of the
// view fails at once.
func (n *Node) Reachable(pid protocol.PID) error {
	if d := pid.Dir(); n.outside.Has(d) {
		return fmt.Errorf("%w: node %d is out of view %d", ErrDirectoryDown, d, n.view)
	} else if err := n.lostDirs[d]; err != nil {
		return err
	}
	return nil
}

// Expel fails the node with err: it may no longer serve (its membership
// lease was lost). Its operations return err.
func (l *Local) Expel(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail(err)
}

// Err is the error that failed the node, nil if it did not fail.
func (l *Local) Err() error {
	if !l.failed.Load() {
		return nil
	}
	return l.firstErr()
}

// Partition cuts the node off its peers (on) or reconnects it: every frame
// in or out is refused, as a network partition would (fault injection for
// crashtest --cluster, node --fault-signals).
func (l *Local) Partition(on bool) { l.partitioned.Store(on) }
