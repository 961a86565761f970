package actors

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// Replicated directories on real processes (docs/replication.md,
// "Processes"). The simulator's coordinator places every directory in one
// step (scenarios/replicas.go, place); here each node does it alone when
// it installs a view, from the view's members and its record of current
// copies (membership.View.Current), both the same on every node:
//
//   - routes: every directory's primary and backup (protocol.Placement);
//   - a node that becomes the primary of another node's directory hosts
//     it (protocol.NewHostedDirectory), rebuilt from the holdings every
//     member reports to it, as its own directory is;
//   - a node that is primary or backup of another node's directory keeps
//     its pages in a store of their own (ReplicaConfig.Store);
//   - a directory with no live current holder is lost: its pages fail at
//     once with an error naming the nodes that hold them (SetLost);
//   - a primary that does not hold its directory's current copies (a node
//     that returns) takes them first: the holder pushes every page to it
//     (TPersist with FlagCatchUp) before it sends its holdings, so the
//     primary's rebuild, which waits for every holdings report, follows the
//     copy; the primary then records itself as current
//     (ReplicaConfig.Record) before it serves;
//   - once active, a primary whose backup does not hold the current copies
//     copies every page to it under its shared latch (re-replication), and
//     records the backup as current.

// ReplicaConfig is what a node with replicated directories needs from
// whoever runs it (cluster.StartNode).
type ReplicaConfig struct {
	// Store opens this node's store of directory dir's pages (dir is
	// another node), and says how many of its slots were written.
	// mustExist: the view counts this node as holding dir's current
	// copies, so a store that is not there is an error (it must name the
	// file and the directory); otherwise a missing one is created empty.
	Store func(dir protocol.NodeID, mustExist bool) (storage.PageStore, uint64, error)
	// Record adds holder to directory dir's current copies in view number
	// (membership.Member.UpdateCurrent), or, with primary, makes the
	// primary that caught up current, with its backup if that was. It runs
	// on a goroutine of its own; an error wrapping ErrViewChanged means the
	// view moved on and the copy does not count.
	Record func(view uint64, dir, holder protocol.NodeID, primary bool) error
}

// ErrViewChanged: a copy finished after the view it was made in ended.
var ErrViewChanged = errors.New("the view changed")

// replicas is Local's state of replicated directories (under l.mu).
type replicas struct {
	cfg     ReplicaConfig
	current map[protocol.NodeID]protocol.NodeSet
	stores  [protocol.MaxNodes]*storeIO
	// in the view being installed: promoted are directories this node
	// begins to host; catchUp those it must take from source first;
	// recorded the catch-ups recorded as current; pushes the pages this
	// node still owes each node it catches up (an acknowledgement counts
	// one down), deferred the nodes whose holdings wait for them.
	promoted, catchUp, recorded, recording protocol.NodeSet
	source                                 [protocol.MaxNodes]protocol.NodeID
	caught                                 [protocol.MaxNodes]uint64
	// caughtEver: the most slots a catch-up of each directory brought, in
	// any view (one may end before its rebuild sized the directory).
	caughtEver        [protocol.MaxNodes]uint64
	pushes            [protocol.MaxNodes]int
	jobs              [protocol.MaxNodes][]pushJob
	pushing, deferred protocol.NodeSet
	pushSeq           uint32
	// placed: a view was placed (the routes name the view before).
	placed bool
	// Rereplications counts the directories this node finished copying
	// to a new backup; CatchUps those it took back.
	rereplications, catchUps int
	// copies are the re-replications running; stopCopies (under l.mu)
	// asks them to stop after their current page (Close: a copy holds a
	// page shared until its backup acknowledged it, and a cache with a
	// latched page cannot be flushed).
	copies     sync.WaitGroup
	stopCopies bool
	// rolls are transactions' rolls (TTxRoll) of directories this node
	// catches up, held until the holder's pushes are all written (its
	// report came: maybeRecord): a pushed page written after a roll would
	// undo it. A view change drops them: their senders roll again.
	rolls []heldFrame
}

// EnableReplicas makes the node keep replicated directories (call it after
// EnableViews, before the first view). Views then come with their record
// of current copies (ChangeViewCurrent).
func (l *Local) EnableReplicas(cfg ReplicaConfig) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rep = &replicas{cfg: cfg}
	l.node.cfg.ViewChanges = true
	l.node.holdOwnRoll = func(pid protocol.PID, data []byte, seq uint32) bool {
		m := protocol.Message{Type: protocol.TTxRoll, From: l.node.id, To: l.node.id, PID: pid, Epoch: seq}
		return l.holdRoll(&m, data)
	}
}

// holdRoll holds a transaction's roll (m, from a peer or this node) of a
// directory this node catches up in the view being installed, until the
// holder's pushed pages are written (maybeRecord); it reports whether it
// did.
func (l *Local) holdRoll(m *protocol.Message, payload []byte) bool {
	r, d := l.rep, m.PID.Dir()
	if r == nil || l.vs.active || !r.catchUp.Has(d) || r.recording.Has(d) {
		return false
	}
	if len(r.rolls) >= maxHeld {
		l.fail(fmt.Errorf("actors: node %d: %d transactions' rolls wait for catch-ups in view %d", l.node.ID(), maxHeld, l.vs.number))
		return true
	}
	r.rolls = append(r.rolls, heldFrame{m: *m, payload: append([]byte(nil), payload...)})
	return true
}

// ReplicaStats are counts of a node's replication work.
type ReplicaStats struct {
	Rereplications, CatchUps int
	Hosted                   []protocol.NodeID // the directories it serves
}

// ReplicaStats reads them.
func (l *Local) ReplicaStats() ReplicaStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s ReplicaStats
	if l.rep == nil {
		return s
	}
	s.Rereplications, s.CatchUps = l.rep.rereplications, l.rep.catchUps
	for d := range protocol.MaxNodes {
		if l.node.hosted[d] != nil && l.node.route[d] == l.node.id {
			s.Hosted = append(s.Hosted, protocol.NodeID(d))
		}
	}
	return s
}

// place applies the placement of view members (current: its record) to
// the node, as the simulator's place() does for every node; it returns the
// directories that are lost (no live node holds their current copies).
func (l *Local) place(members protocol.NodeSet, current map[protocol.NodeID]protocol.NodeSet) (lost protocol.NodeSet, err error) {
	r, n, self := l.rep, l.node, l.node.id
	r.current = current
	r.promoted, r.catchUp, r.recorded, r.recording = protocol.NodeSet{}, protocol.NodeSet{}, protocol.NodeSet{}, protocol.NodeSet{}
	r.pushing, r.deferred = protocol.NodeSet{}, protocol.NodeSet{}
	r.rolls = nil
	r.pushes = [protocol.MaxNodes]int{}
	r.jobs = [protocol.MaxNodes][]pushJob{}
	r.caught = [protocol.MaxNodes]uint64{}
	for i := range protocol.MaxNodes {
		d := protocol.NodeID(i)
		cur, known := current[d]
		if !known && !members.Has(d) {
			continue // no such directory
		}
		p, b, hb, ok := protocol.Placement(d, members, 2)
		avail := cur
		for j := range avail {
			avail[j] &= members[j]
		}
		if !ok || avail.Empty() {
			lost.Add(d)
			if d != self && n.hosted[d] != nil {
				n.Host(d, nil)
			}
			err := n.lostDirs[d] // lost in an earlier view already
			if err == nil {
				err = lostError(d, cur, members, n.route[d], n.backups[d], n.hasBackup.Has(d) && r.placed)
			}
			n.SetRoute(d, d, 0, false)
			n.SetLost(d, err)
			continue
		}
		n.SetLost(d, nil)
		n.SetRoute(d, p, b, hb)
		if d != self {
			switch {
			case p == self && n.hosted[d] == nil:
				n.Host(d, protocol.NewHostedDirectory(d, self, n.cfg.Variant, n.cfg.SSDPages))
				r.promoted.Add(d)
			case p != self && n.hosted[d] != nil:
				n.Host(d, nil)
			}
			if p == self || (hb && b == self) || cur.Has(self) {
				if err := l.openReplica(d, cur.Has(self)); err != nil {
					return lost, err
				}
			}
		}
		if !cur.Has(p) {
			// p returns (or precedes the acting primary): it takes the
			// current copies from a live holder before it serves.
			src, _, _, _ := protocol.Placement(d, avail, 2)
			switch self {
			case p:
				r.catchUp.Add(d)
				r.source[d] = src
				if d != self && n.hosted[d] != nil && !r.promoted.Has(d) {
					// Hosted before with copies that are not current:
					// start afresh from the catch-up.
					n.Host(d, protocol.NewHostedDirectory(d, self, n.cfg.Variant, n.cfg.SSDPages))
					r.promoted.Add(d)
				}
			case src:
				r.deferred.Add(p)
				r.pushing.Add(p)
			}
		}
	}
	r.placed = true
	return lost, nil
}

// pendingCatchUp reports whether a catch-up of this view is not recorded
// yet.
func (r *replicas) pendingCatchUp() bool {
	for i := range r.catchUp {
		if r.catchUp[i]&^r.recorded[i] != 0 {
			return true
		}
	}
	return false
}

// lostError names the nodes that held directory d's copies: its primary
// and backup in the view before (as the simulator's), and the nodes the
// record counts as holding its current pages.
func lostError(d protocol.NodeID, cur, members protocol.NodeSet, primary, backup protocol.NodeID, hadBackup bool) error {
	var held string
	if cur.Empty() {
		held = "no node holds its pages"
	} else {
		held = fmt.Sprintf("its current pages are on nodes %v", cur)
	}
	switch {
	case !members.Has(primary) && !hadBackup:
		return fmt.Errorf("%w: directory %d lost both copies: node %d, its primary, is down and it had no backup (%s)", ErrDirectoryDown, d, primary, held)
	case !members.Has(primary) && members.Has(backup):
		return fmt.Errorf("%w: directory %d lost both copies: node %d, its primary, is down and node %d, its backup, was still being copied (%s)", ErrDirectoryDown, d, primary, backup, held)
	case !members.Has(primary):
		return fmt.Errorf("%w: directory %d lost both copies: nodes %d and %d, its primary and backup, are down (%s)", ErrDirectoryDown, d, primary, backup, held)
	}
	return fmt.Errorf("%w: directory %d lost both copies: %s, out of the view %v", ErrDirectoryDown, d, held, members)
}

// openReplica opens this node's store of directory d, once.
func (l *Local) openReplica(d protocol.NodeID, mustExist bool) error {
	r := l.rep
	if r.stores[d] != nil {
		return nil
	}
	if r.cfg.Store == nil {
		return fmt.Errorf("actors: node %d: directory %d's pages need a store here, and the node has no replica stores", l.node.id, d)
	}
	st, written, err := r.cfg.Store(d, mustExist)
	if err != nil {
		return fmt.Errorf("actors: node %d: directory %d: %w", l.node.id, d, err)
	}
	s := &storeIO{l: l, st: st, allocated: written, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	r.stores[d] = s
	l.node.SetPageIO(d, s)
	return nil
}

// holdingsFor lists the valid copies this node holds of the pages of the
// directories node to serves in the view.
func (l *Local) holdingsFor(to protocol.NodeID) []protocol.ViewEntry {
	if l.rep == nil {
		return l.holdingsOf(to)
	}
	out := l.vs.scratch[:0]
	c, n := l.node.Cache(), l.node
	for i := range c.Frames() {
		f := c.Frame(i)
		d := f.PID.Dir()
		if n.route[d] != to || n.lostDirs[d] != nil || c.Lookup(f.PID) != f {
			continue
		}
		if m := n.Holding(f.PID); m != protocol.ModeNone {
			out = append(out, protocol.ViewEntry{PID: f.PID, Mode: m})
		}
	}
	l.vs.scratch = out
	return out
}

// servedBy is the set of directories node h serves in the view.
func (l *Local) servedBy(h protocol.NodeID) protocol.NodeSet {
	var s protocol.NodeSet
	if l.rep == nil {
		s.Add(h)
		return s
	}
	for d := range protocol.MaxNodes {
		if l.node.route[d] == h && l.node.lostDirs[d] == nil {
			s.Add(protocol.NodeID(d))
		}
	}
	return s
}

// startPushes sends every page of the directories node p catches up from
// this node, once the writes this node's stores have in flight landed
// (they are the old view's; the view change issues no new ones to these
// stores).
func (l *Local) startPushes() {
	r := l.rep
	if r.pushing.Empty() {
		return
	}
	view := l.vs.number
	go func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		// The source of a catch-up is never the directory's own node
		// (that one is its primary when live): only the stores of other
		// directories must be quiet.
		for l.replicaIO() > 0 && l.vs.number == view && !l.closed {
			l.mu.Unlock()
			time.Sleep(time.Millisecond)
			l.mu.Lock()
		}
		if l.vs.number != view || l.closed || l.failed.Load() {
			return
		}
		self := l.node.id
		r.pushing.Each(func(p protocol.NodeID) {
			for i := range protocol.MaxNodes {
				d := protocol.NodeID(i)
				if cur, ok := r.current[d]; !ok || cur.Has(p) || l.node.route[d] != p || l.node.lostDirs[d] != nil {
					continue
				}
				var avail protocol.NodeSet
				cur := r.current[d]
				cur.Each(func(h protocol.NodeID) {
					if l.vs.members.Has(h) {
						avail.Add(h)
					}
				})
				if src, _, _, _ := protocol.Placement(d, avail, 2); src != self {
					continue
				}
				r.jobs[p] = append(r.jobs[p], pushJob{d: d, slots: l.pushSlots(d)})
				l.log.Info("catching up a returning primary", "node", self, "directory", d, "to", p, "pages", l.pushSlots(d), "view", l.vs.number)
			}
			l.pushMore(p)
		})
	}()
}

// replicaIO counts the requests in flight on the replica stores.
func (l *Local) replicaIO() int {
	n := 0
	for _, s := range l.rep.stores {
		if s != nil {
			n += s.inflight
		}
	}
	return n
}

// pushJob is a directory being pushed to its returning primary: slots
// from next on are still to be read.
type pushJob struct {
	d           protocol.NodeID
	next, slots uint64
}

// pushWindow bounds the pages of a catch-up read or unacknowledged at
// once (its memory).
const pushWindow = 64

// pushSlots is how many slots of directory d this node's stores hold.
func (l *Local) pushSlots(d protocol.NodeID) uint64 {
	r, n := l.rep, l.node
	slots := uint64(0)
	if d == n.id {
		slots = n.dir.Allocated()
	}
	if s := r.stores[d]; s != nil {
		slots = max(slots, s.allocated)
	}
	if hd := n.hosted[d]; hd != nil && d != n.id {
		slots = max(slots, hd.Allocated())
	}
	return slots
}

// pushMore reads and sends the next pages to p, up to pushWindow
// outstanding; once none is left, p gets this node's holdings.
func (l *Local) pushMore(p protocol.NodeID) {
	r, n := l.rep, l.node
	for r.pushes[p] < pushWindow && len(r.jobs[p]) > 0 {
		j := &r.jobs[p][0]
		if j.next == j.slots {
			r.jobs[p] = r.jobs[p][1:]
			continue
		}
		d, pid := j.d, protocol.MakePID(j.d, j.next)
		j.next++
		r.pushes[p]++
		buf := n.getBuf()
		n.storageOp(false, pid, buf, 0, func(err error) {
			if err != nil {
				l.fail(fmt.Errorf("actors: node %d: catching node %d up on directory %d: %w", n.id, p, d, err))
				return
			}
			r.pushSeq++
			n.send(protocol.Message{Type: protocol.TPersist, To: p, PID: pid, Epoch: r.pushSeq, Flags: protocol.FlagCatchUp}, buf)
			n.putBuf(buf)
		})
	}
	l.maybePushed(p)
}

// onCatchUpAck counts an acknowledgement of a pushed page.
func (l *Local) onCatchUpAck(m *protocol.Message) {
	r := l.rep
	if r == nil || !r.pushing.Has(m.From) || r.pushes[m.From] == 0 {
		l.badViewFrame(m, fmt.Errorf("catch-up acknowledgement from node %d, which this node does not catch up", m.From))
		return
	}
	r.pushes[m.From]--
	l.pushMore(m.From)
}

// maybePushed sends p this node's holdings once every page pushed to it
// was acknowledged: p's rebuild, which waits for them, follows its copy.
func (l *Local) maybePushed(p protocol.NodeID) {
	r := l.rep
	if r.pushes[p] > 0 || len(r.jobs[p]) > 0 || !r.deferred.Has(p) {
		return
	}
	r.deferred.Remove(p)
	r.catchUps++
	l.sendEntries(protocol.THoldings, p, l.holdingsFor(p))
}

// onCatchUp writes a page the holder of a directory's current copies
// pushed to this node, its returning primary, and acknowledges it.
func (l *Local) onCatchUp(m *protocol.Message, payload []byte) {
	r, n := l.rep, l.node
	d := m.PID.Dir()
	if r == nil || !r.catchUp.Has(d) || r.source[d] != m.From || l.vs.reported.Has(m.From) {
		l.badViewFrame(m, fmt.Errorf("catch-up page from node %d, which does not catch this node up on directory %d", m.From, d))
		return
	}
	r.caught[d] = max(r.caught[d], m.PID.Slot()+1)
	r.caughtEver[d] = max(r.caughtEver[d], r.caught[d])
	n.writeAndAck(payload, protocol.Message{Type: protocol.TPersistAck, To: m.From, PID: m.PID, Epoch: m.Epoch, Flags: protocol.FlagCatchUp})
}

// maybeRecord records, once the holder's report follows its pushes, each
// directory this node caught up from it as current on this node, then
// lets the rebuild go on.
func (l *Local) maybeRecord(from protocol.NodeID) {
	r := l.rep
	if r == nil {
		return
	}
	view := l.vs.number
	r.catchUp.Each(func(d protocol.NodeID) {
		if r.source[d] != from || r.recording.Has(d) {
			return
		}
		r.recording.Add(d)
		self := l.node.id
		l.log.Info("caught up", "node", self, "directory", d, "from", from, "pages", r.caught[d], "view", view)
		kept := r.rolls[:0]
		for _, h := range r.rolls {
			switch {
			case h.m.PID.Dir() != d:
				kept = append(kept, h)
			case h.m.From == self:
				l.node.rollOwn(h.m.PID, h.payload, h.m.Epoch)
			default:
				l.sizeForRoll(d)
				l.node.onTxRoll(&h.m, h.payload)
			}
		}
		r.rolls = kept
		go l.record(view, d, self, true, func() {
			r.recorded.Add(d)
			l.maybeRebuild()
		})
	})
}

// record runs ReplicaConfig.Record until it succeeds or the view moves on,
// then, if it succeeded in the view, done under the lock.
func (l *Local) record(view uint32, d, holder protocol.NodeID, primary bool, done func()) {
	for attempt := 0; ; attempt++ {
		err := l.rep.cfg.Record(uint64(view), d, holder, primary)
		l.mu.Lock()
		stale := l.vs.number != view || l.closed || l.failed.Load() || l.rep.stopCopies
		switch {
		case stale || errors.Is(err, ErrViewChanged):
		case err == nil:
			done()
		case attempt >= 20:
			l.fail(fmt.Errorf("actors: node %d: recording directory %d's copy on node %d in view %d: %w", l.node.id, d, holder, view, err))
		default:
			l.mu.Unlock()
			l.log.Warn("recording a copy failed; retrying", "node", l.node.id, "directory", d, "holder", holder, "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		l.mu.Unlock()
		return
	}
}

// sizeForRoll sizes another node's directory that this node serves in
// the view being installed to the pages of its store, before a
// transaction's roll of one of them is written: a promoted directory
// starts empty and is sized when it rebuilds (growHosted), but the rolls
// come first (the committer sends them before its holdings, which the
// rebuild waits for), and a roll of a page the directory does not know
// is a protocol violation. Only the store is trusted for the size, not
// the roll's page number.
func (l *Local) sizeForRoll(d protocol.NodeID) {
	r, n := l.rep, l.node
	if r == nil || d == n.id || n.route[d] != n.id || n.hosted[d] == nil || r.stores[d] == nil {
		return
	}
	if err := n.hosted[d].Grow(r.stores[d].allocated); err != nil {
		l.fail(fmt.Errorf("actors: node %d: view %d: directory %d: %w", n.id, l.vs.number, d, err))
	}
}

// growHosted sizes a directory this node serves to every page its store,
// its catch-ups or the holdings name: another node's directory always (a
// promoted one starts empty, and a view may end before it was ever
// rebuilt, so the next view must size it), its own to its catch-ups (and
// the holdings, in the view of one).
func (l *Local) growHosted(d protocol.NodeID, dir *protocol.Directory) error {
	r := l.rep
	if r == nil {
		return nil
	}
	want := r.caughtEver[d]
	if d == l.node.id && !r.catchUp.Has(d) {
		return dir.Grow(want) // pages a catch-up of an earlier view brought
	}
	if s := r.stores[d]; s != nil && d != l.node.id {
		want = max(want, s.allocated)
	}
	for pid := range l.vs.holds {
		if pid.Dir() == d {
			want = max(want, pid.Slot()+1)
		}
	}
	return dir.Grow(want)
}

// startRereplication copies, once the node is active, each directory it
// serves to a backup that does not hold the current copies
// (docs/replication.md, decision 4).
func (l *Local) startRereplication() {
	r, n := l.rep, l.node
	if r == nil {
		return
	}
	view := l.vs.number
	for i := range protocol.MaxNodes {
		d := protocol.NodeID(i)
		cur, ok := r.current[d]
		if !ok || n.route[d] != n.id || n.lostDirs[d] != nil || !n.hasBackup.Has(d) || cur.Has(n.backups[d]) {
			continue
		}
		if r.catchUp.Has(d) {
			// Recorded with its backup if that was current; otherwise the
			// backup needs a copy too.
			if c := r.current[d]; c.Has(n.backups[d]) {
				continue
			}
		}
		b := n.backups[d]
		slots := n.dirOf(protocol.MakePID(d, 0)).Allocated()
		if r.stopCopies {
			continue
		}
		r.copies.Add(1)
		go func() {
			defer r.copies.Done()
			l.rereplicate(view, d, b, slots)
		}()
	}
}

// StopRereplication stops the re-replications after their current page
// and waits for them. A node that shuts down calls it while it still
// follows the views: a copy that waits for a peer which left meanwhile is
// released by the view change without it, which a node that left its own
// view no longer installs (it would wait out the request timeout and
// fail its Close).
func (l *Local) StopRereplication() { l.stopRereplication() }

// stopRereplication is StopRereplication (also at Close).
func (l *Local) stopRereplication() {
	l.mu.Lock()
	r := l.rep
	if r != nil {
		r.stopCopies = true
	}
	l.mu.Unlock()
	if r != nil {
		r.copies.Wait()
	}
}

// rereplicate copies directory d's pages to its new backup b, each held
// shared through this node's cache until b acknowledged it, so that no
// write-through of it is under way or starts meanwhile; then records b as
// current. A view change stops it.
func (l *Local) rereplicate(view uint32, d, b protocol.NodeID, slots uint64) {
	start := time.Now()
	n := l.node
	for slot := range slots {
		pid := protocol.MakePID(d, slot)
		var ok bool
		err := l.Do(func(w *bufmgr.Worker) error {
			g := n.Cache().Shared(w, pid)
			defer g.Release()
			l.Locked(func() {
				if l.vs.number == view && !l.rep.stopCopies {
					ok = n.Replicate(w, pid, g.Data(), b)
				}
			})
			return nil
		})
		if err != nil || !ok {
			if err != nil {
				l.log.Warn("re-replication stopped", "node", n.id, "directory", d, "to", b, "page", pid, "err", err)
			}
			return
		}
	}
	l.log.Info("re-replicated", "node", n.id, "directory", d, "to", b, "pages", slots, "took", time.Since(start), "view", view)
	l.record(view, d, b, false, func() { l.rep.rereplications++ })
}

// storeIO is a node's store of another directory's pages (PageIO): its
// requests run on a goroutine of its own, and complete under the node's
// lock as the node's own store's do.
type storeIO struct {
	l         *Local
	st        storage.PageStore
	allocated uint64 // slots written (under l.mu)
	inflight  int    // requests queued or running (under l.mu)
	mu        sync.Mutex
	q         []ioRequest
	syncs     []chan error // flushes asked for (sync)
	kick      chan struct{}
	stop      bool
	done      chan struct{}
}

// ReadPage implements PageIO (under l.mu).
func (s *storeIO) ReadPage(slot uint64, buf []byte, done func(error)) {
	s.queue(ioRequest{false, slot, buf, done})
}

// WritePage implements PageIO (under l.mu).
func (s *storeIO) WritePage(slot uint64, buf []byte, done func(error)) {
	s.allocated = max(s.allocated, slot+1)
	s.queue(ioRequest{true, slot, buf, done})
}

func (s *storeIO) queue(r ioRequest) {
	s.l.inFlite++
	s.inflight++
	done := r.done
	r.done = func(err error) {
		s.inflight--
		done(err)
	}
	s.mu.Lock()
	s.q = append(s.q, r)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *storeIO) loop() {
	defer close(s.done)
	async, _ := s.st.(AsyncStore)
	for {
		s.mu.Lock()
		batch, syncs := s.q, s.syncs
		s.q, s.syncs = nil, nil
		stop := s.stop
		s.mu.Unlock()
		inflight := 0
		if async != nil {
			inflight = async.InFlight()
		}
		if len(batch) == 0 && len(syncs) == 0 && inflight == 0 {
			if stop {
				return
			}
			<-s.kick
			continue
		}
		if async == nil {
			for _, r := range batch {
				var err error
				if r.write {
					err = s.st.WritePage(r.slot, r.buf)
				} else {
					err = s.st.ReadPage(r.slot, r.buf)
				}
				s.l.complete(r, err)
			}
		} else if err := s.submit(async, batch); err != nil {
			s.l.mu.Lock()
			s.l.fail(fmt.Errorf("actors: node %d: a replica store: %w", s.l.node.id, err))
			s.l.mu.Unlock()
		}
		if len(batch) > 0 {
			s.l.mu.post()
		}
		if len(syncs) > 0 {
			// Every write whose completion asked for this flush ran
			// already (its completion came after it).
			var err error
			if ds, ok := s.st.(interface{ DataSync() error }); ok {
				err = ds.DataSync()
			}
			for _, ch := range syncs {
				ch <- err
			}
		}
	}
}

// submit hands batch to an asynchronous store (many writes in one log
// write, as the node's own store's) and reaps what completed; with
// nothing new queued it waits for a completion.
func (s *storeIO) submit(async AsyncStore, batch []ioRequest) error {
	for _, r := range batch {
		cb := func(err error) { s.l.complete(r, err) }
		var err error
		if r.write {
			err = async.WriteAsync(r.slot, r.buf, cb)
		} else {
			err = async.ReadAsync(r.slot, r.buf, cb)
		}
		if err != nil {
			s.l.complete(r, err)
		}
	}
	if len(batch) > 0 {
		if err := async.Submit(); err != nil {
			return err
		}
	}
	n, err := async.Poll(0)
	if err != nil {
		return err
	}
	if n > 0 {
		s.l.mu.post()
	}
	s.mu.Lock()
	idle := len(s.q) == 0 && len(s.syncs) == 0
	s.mu.Unlock()
	if idle && n == 0 && async.InFlight() > 0 {
		if err := async.WaitCompletions(); err != nil {
			return err
		}
		n, err := async.Poll(0)
		if n > 0 {
			s.l.mu.post()
		}
		return err
	}
	return nil
}

// sync flushes the store's device cache (durability sync), on the
// store's goroutine: the store is not used by two at once.
func (s *storeIO) sync() error {
	ch := make(chan error, 1)
	s.mu.Lock()
	if s.stop {
		s.mu.Unlock()
		return errors.New("actors: the replica store is closed")
	}
	s.syncs = append(s.syncs, ch)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return <-ch
}

// syncReplicaStores flushes every replica store (called without l.mu).
func (l *Local) syncReplicaStores() error {
	var stores []*storeIO
	l.mu.Lock()
	if l.rep != nil {
		for _, s := range l.rep.stores {
			if s != nil {
				stores = append(stores, s)
			}
		}
	}
	l.mu.Unlock()
	for _, s := range stores {
		if err := s.sync(); err != nil {
			return err
		}
	}
	return nil
}

// close stops the goroutine once its requests ran.
func (s *storeIO) close() {
	s.mu.Lock()
	s.stop = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	<-s.done
}

// stopReplicaStores stops the replica stores' goroutines (the node stops;
// their owner closes the stores).
func (l *Local) stopReplicaStores() {
	if l.rep == nil {
		return
	}
	for _, s := range l.rep.stores {
		if s != nil {
			s.close()
		}
	}
}
