package actors

import (
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// The page provider (paper §4.2): it keeps cfg.FreeTarget frames free by
// sampling frames, picking the coldest by their LRU epoch, and evicting them:
// pages of its own directory directly, others through batched eviction
// requests to their directories, which pull the dirty ones.

// NeedFrames implements bufmgr.Remote: a worker found no free frame.
func (n *Node) NeedFrames() {
	if !n.tickArmed {
		n.armTickAfter(0)
	}
}

func (n *Node) armTick() { n.armTickAfter(n.cfg.ProviderInterval) }

func (n *Node) armTickAfter(d int64) {
	if n.tickArmed {
		return
	}
	n.tickArmed = true
	n.env.After(d, n.providerTickFn)
}

func (n *Node) providerTick() {
	n.tickArmed = false
	if n.stopped || n.dead {
		return
	}
	if n.gated {
		n.armTick() // a view change: the directories' metadata is being rebuilt
		return
	}
	n.EvictCold(n.cfg.FreeTarget)
	if now := n.env.Now(); !n.cfg.NoProgressCheck && now-n.lastProgressCheck >= progressCheckEvery {
		n.lastProgressCheck = now
		n.checkProgress()
	}
	n.armTick()
}

// EvictCold starts evictions until target frames would be free (frames
// already being evicted count as free soon).
func (n *Node) EvictCold(target int) {
	need := target - n.cache.FreeFrames() - n.evicting
	if need <= 0 {
		return
	}
	for round := 0; need > 0 && round < n.cfg.EvictRounds; round++ {
		n.candidates = n.cache.Candidates(n.candidates[:0], n.cfg.SampleSize, n.cfg.Percentile, n.env.Rand)
		for _, f := range n.candidates {
			if need <= 0 {
				break
			}
			if !n.cache.Claim(f) {
				continue
			}
			n.startEvict(f)
			need--
		}
	}
	n.flushBatches()
	n.drain()
}

// EvictAll starts the eviction of every evictable frame (the final flush).
func (n *Node) EvictAll() {
	if n.gated {
		return // a view change: see providerTick (Leave asks again)
	}
	for i := range n.cache.Frames() {
		if f := n.cache.Frame(i); n.cache.Claim(f) {
			n.startEvict(f)
		}
	}
	n.flushBatches()
	n.drain()
}

// CleanStale writes back every page of this node's directory whose SSD
// copy is stale, for a checkpoint that keeps the pages cached: a page this
// node holds exclusively is written back in place
// (Directory.WriteBackInPlace; the frame keeps it, shared), any other is
// evicted, the directory pulling it. It returns how many such frames it
// could not claim now (latched, or being written back already).
func (n *Node) CleanStale() (busy int) {
	busy, _ = n.CleanStaleFrames(0, n.cache.Frames())
	return busy
}

// CleanStaleFrames is CleanStale over the frames from first, up to limit
// of them; next is where the following call goes on (Frames: done).
func (n *Node) CleanStaleFrames(first, limit int) (busy, next int) {
	next = min(first+limit, n.cache.Frames())
	for i := first; i < next; i++ {
		f := n.cache.Frame(i)
		if f.Mode == protocol.ModeNone || f.Evicting || n.route[f.PID.Dir()] != n.id {
			continue
		}
		m := n.dirOf(f.PID).Meta(f.PID)
		if m == nil || !m.Stale {
			continue
		}
		if m.InTransition() {
			busy++ // being written back already
			continue
		}
		if !n.cache.Claim(f) {
			busy++
			continue
		}
		if f.Mode == protocol.ModeExclusive && !f.Unreadable && m.Mode == protocol.ModeExclusive && m.Owner == n.id {
			n.cleanInPlace(f)
		} else {
			n.startEvict(f)
		}
	}
	n.flushBatches()
	n.drain()
	return busy, next
}

// cleanInPlace writes f's page back while f keeps it, shared.
func (n *Node) cleanInPlace(f *bufmgr.Frame) {
	pid := f.PID
	if err := n.dirOf(pid).WriteBackInPlace(pid, n.id); err != nil {
		n.violation("%v", err)
		return
	}
	buf := n.getBuf()
	copy(buf, n.cache.Page(f))
	f.Mode = protocol.ModeShared // the frame is slow (Claim): latch holders take the slow path
	n.obs.CopyChanged(n.id, pid, protocol.ModeExclusive, protocol.ModeShared, n.copyData(f))
	n.cache.Changed(f)
	n.writeSSD(pid, buf, 0, func() {
		n.putBuf(buf)
		if err := n.dirOf(pid).Persisted(pid); err != nil {
			n.violation("%v", err)
			return
		}
		n.resumeParked(pid)
	})
}

// EvictPage starts the eviction of one page if its frame is evictable now.
func (n *Node) EvictPage(pid protocol.PID) bool {
	if n.gated || n.dead {
		return false // a view change: see providerTick; or a crashed node's timer
	}
	f := n.cache.Lookup(pid)
	if f == nil || !n.cache.Claim(f) {
		return false
	}
	n.startEvict(f)
	n.flushBatches()
	n.drain()
	return true
}

func (n *Node) startEvict(f *bufmgr.Frame) {
	// From now on no worker may use the copy (the directory may accept the
	// eviction at once), so it stops counting as valid until a decline.
	f.Evicting = true
	n.evicting++
	n.obs.CopyChanged(n.id, f.PID, f.Mode, protocol.ModeNone, nil)
	n.Stats.Evictions++
	e := protocol.EvictEntry{PID: f.PID, Epoch: f.Epoch, Served: f.Served}
	dir := n.route[f.PID.Dir()]
	if dir == n.id && f.Unreadable && n.cfg.UnallocatedUnreadable && n.dirOf(f.PID).Meta(f.PID) == nil {
		n.applyEviction(f, protocol.EvictAccepted, true) // grantUnallocated's: nothing to write, no directory to tell
		return
	}
	if dir == n.id {
		d, err := n.dirOf(f.PID).Evict(n.id, e)
		if err != nil {
			n.violation("%v", err)
		}
		n.applyEviction(f, d, true)
		return
	}
	if len(n.batches[dir]) == 0 {
		n.batchDirs = append(n.batchDirs, dir)
	}
	n.batches[dir] = append(n.batches[dir], e)
	if len(n.batches[dir]) == protocol.MaxEvictBatch {
		n.flushBatch(dir)
	}
}

func (n *Node) flushBatches() {
	for _, d := range n.batchDirs {
		if len(n.batches[d]) > 0 {
			n.flushBatch(d)
		}
	}
	n.batchDirs = n.batchDirs[:0]
}

func (n *Node) flushBatch(dir protocol.NodeID) {
	b := n.batches[dir]
	buf := n.getBuf()
	protocol.EncodeEvictEntries(buf, b)
	n.send(protocol.Message{Type: protocol.TEvict, To: dir, Count: uint16(len(b))}, buf[:len(b)*protocol.EvictEntrySize])
	n.putBuf(buf)
	n.batches[dir] = b[:0]
}

// onEvict decides an eviction batch at the directory.
func (n *Node) onEvict(m *protocol.Message, payload []byte) {
	var err error
	n.entries, err = protocol.DecodeEvictEntries(n.entries[:0], payload, int(m.Count), false)
	if err != nil {
		n.violation("eviction batch from node %d: %v", m.From, err)
		return
	}
	for i := range n.entries {
		d, err := n.dirOf(n.entries[i].PID).Evict(m.From, n.entries[i])
		if err != nil {
			n.violation("%v", err)
		}
		n.entries[i].Decision = d
	}
	buf := n.getBuf()
	protocol.EncodeEvictEntries(buf, n.entries)
	n.send(protocol.Message{Type: protocol.TEvictReply, To: m.From, Count: m.Count}, buf[:len(n.entries)*protocol.EvictEntrySize])
	n.putBuf(buf)
}

func (n *Node) onEvictReply(m *protocol.Message, payload []byte) {
	var err error
	n.entries, err = protocol.DecodeEvictEntries(n.entries[:0], payload, int(m.Count), true)
	if err != nil {
		n.violation("eviction reply from node %d: %v", m.From, err)
		return
	}
	for _, e := range n.entries {
		f := n.cache.Lookup(e.PID)
		if f == nil || !f.Evicting || n.route[e.PID.Dir()] != m.From {
			n.violation("eviction reply for %v, which this node is not evicting", e.PID)
			continue
		}
		n.applyEviction(f, e.Decision, false)
	}
}

func (n *Node) applyEviction(f *bufmgr.Frame, d protocol.EvictDecision, local bool) {
	f.Evicting = false
	n.evicting--
	switch d {
	case protocol.EvictDeclined:
		n.Stats.EvictDeclined++
		n.obs.CopyChanged(n.id, f.PID, protocol.ModeNone, f.Mode, n.copyData(f))
		n.serve(f)
		return
	case protocol.EvictPull:
		n.Stats.Pulls++
		if local {
			pid := f.PID
			if err := n.dirOf(pid).PulledPage(n.id, pid); err != nil {
				n.violation("%v", err)
			}
			buf := n.getBuf()
			copy(buf, n.cache.Page(f))
			n.persist(pid, buf, f.Unreadable)
		} else {
			n.send(protocol.Message{Type: protocol.TEvictData, To: n.route[f.PID.Dir()], PID: f.PID, Flags: pageFlags(f)},
				n.cache.Page(f))
		}
	case protocol.EvictAccepted:
	}
	if q := n.cache.Queue(f); len(*q) > 0 {
		n.violation("eviction of %v accepted while %d transfer(s) wait for it (owner stability broken)", f.PID, len(*q))
		*q = (*q)[:0]
	}
	n.cache.DropEntitlements(f)
	n.cache.Invalidate(f) // already reported as no longer valid
}

// onEvictData persists a pulled dirty page at the directory.
func (n *Node) onEvictData(m *protocol.Message, payload []byte) {
	if err := n.dirOf(m.PID).PulledPage(m.From, m.PID); err != nil {
		n.violation("%v", err)
		return
	}
	buf := n.getBuf()
	copy(buf, payload)
	n.persist(m.PID, buf, m.Flags&protocol.FlagUnreadable != 0)
}

// persist writes a pulled page to the SSD, unless it is unreadable: nobody
// could have changed a page nobody could read, so the SSD copy is still the
// latest, and writing the frame's meaningless bytes over it would turn a
// page that fails loudly into one that lies.
func (n *Node) persist(pid protocol.PID, buf []byte, unreadable bool) {
	done := func() {
		n.putBuf(buf)
		if err := n.dirOf(pid).Persisted(pid); err != nil {
			n.violation("%v", err)
			return
		}
		n.resumeParked(pid)
	}
	if unreadable {
		done()
		return
	}
	if n.cfg.Mutations.DropDirty != nil && n.cfg.Mutations.DropDirty() {
		done() // mutation: the dirty page never reaches the SSD
		return
	}
	n.writeSSD(pid, buf, 0, done)
}

// progressCheckEvery spaces the scans of checkProgress (it looks at every
// frame).
const progressCheckEvery = 10_000_000 // 10 ms

// checkProgress reports requests outstanding for longer than the bound.
func (n *Node) checkProgress() {
	// The bound is generous: stalls and slow links of the heavy fault plan
	// delay requests by milliseconds, a lost or deadlocked request never
	// completes.
	const bound = 500_000_000 // 0.5 s simulated
	now := n.env.Now()
	for i := range n.cache.Frames() {
		f := n.cache.Frame(i)
		if f.Pending != protocol.ModeNone && now-f.ReqStart > bound {
			n.violation("request for %v in mode %v outstanding for %d ns (%s)", f.PID, f.Pending, now-f.ReqStart, n.DescribeFrame(f.PID))
			f.ReqStart = now // report once per bound
		}
	}
}

// ---- page allocation (paper §3.3: the directory is where a page is created) ----

// Allocate creates a page on directory dir's SSD and latches it
// exclusively for w; the page starts zeroed. ok is false when dir's SSD is
// full.
func (n *Node) Allocate(w *bufmgr.Worker, dir protocol.NodeID) (g bufmgr.ExclusiveGuard, ok bool) {
	g, ok, _ = n.AllocateOn(w, dir)
	return g, ok
}

// ErrAllocationCut: a view change cut an allocation on another node short
// (its reply was dropped with the old view's messages, or the node is out
// of the view); the slot it may have taken there stays unused.
var ErrAllocationCut = errors.New("an allocation on another node was cut short by a view change")

// AllocateOn is Allocate that also reports why an allocation on another
// directory failed: ErrDirectoryDown (the directory is out of the view)
// or ErrAllocationCut; ok is false with a nil error when dir's SSD is full.
func (n *Node) AllocateOn(w *bufmgr.Worker, dir protocol.NodeID) (g bufmgr.ExclusiveGuard, ok bool, err error) {
	if dir != n.id {
		if err := n.Reachable(protocol.MakePID(dir, 0)); err != nil {
			return g, false, err
		}
		if n.route[dir] != dir {
			return g, false, fmt.Errorf("node %d: %w", dir, ErrDirectoryMoved)
		}
	}
	f := n.cache.Take()
	for f == nil {
		n.cache.WaitFrame(w)
		f = n.cache.Take()
	}
	var pid protocol.PID
	if dir == n.id {
		pid, ok = n.dir.Allocate(n.id)
	} else {
		aw := &allocWaiter{w: w, f: f}
		n.allocWait[dir] = append(n.allocWait[dir], aw)
		n.send(protocol.Message{Type: protocol.TAlloc, To: dir}, nil)
		for !aw.done {
			w.P.Park()
		}
		pid, ok = aw.pid, !aw.full
		if aw.cut {
			n.cache.Untake(f)
			return g, false, fmt.Errorf("node %d: %w", dir, ErrAllocationCut)
		}
	}
	if !ok {
		n.cache.Untake(f)
		return bufmgr.ExclusiveGuard{}, false, nil
	}
	f = n.cache.Bind(f, pid)
	clear(n.cache.Page(f))
	f.Mode = protocol.ModeExclusive
	n.obs.CopyChanged(n.id, pid, protocol.ModeNone, protocol.ModeExclusive, n.cache.Page(f))
	return n.cache.ExclusiveHeld(w, pid), true, nil
}

func (n *Node) onAlloc(m *protocol.Message) {
	pid, ok := n.dir.Allocate(m.From)
	reply := protocol.Message{Type: protocol.TAllocReply, To: m.From, PID: pid}
	if !ok {
		reply.PID, reply.Flags = 0, protocol.FlagFull
	}
	n.send(reply, nil)
}

func (n *Node) onAllocReply(m *protocol.Message) {
	q := n.allocWait[m.From]
	if len(q) == 0 {
		n.violation("%v without an allocation outstanding", *m)
		return
	}
	aw := q[0]
	n.allocWait[m.From] = q[1:]
	aw.done, aw.pid, aw.full = true, m.PID, m.Flags&protocol.FlagFull != 0
	aw.w.P.Wake()
}

// DescribeFrame summarises this node's frame of pid (for violation reports).
func (n *Node) DescribeFrame(pid protocol.PID) string {
	f := n.cache.Lookup(pid)
	if f == nil {
		return fmt.Sprintf("node %d: no frame for %v", n.id, pid)
	}
	return fmt.Sprintf("node %d frame %v: mode=%v pending=%v awaitResp=%v awaitData=%v acks=%d epoch=%d reqEpoch=%d served=%d evicting=%v unreadable=%v entitled=%d waiters=%v latchFree=%v queue=%+v",
		n.id, pid, f.Mode, f.Pending, f.AwaitResp, f.AwaitData, f.AwaitAcks, f.Epoch, f.ReqEpoch, f.Served, f.Evicting,
		f.Unreadable, f.Entitled(), n.cache.HasWaiters(f), f.Latch.Free(), *n.cache.Queue(f))
}

// DescribeHeld describes up to limit frames in use (for a node that cannot
// hand its pages back).
func (n *Node) DescribeHeld(limit int) string {
	s := ""
	for i := range n.cache.Frames() {
		f := n.cache.Frame(i)
		if n.cache.Lookup(f.PID) != f {
			continue
		}
		if limit == 0 {
			return s + "; ..."
		}
		limit--
		s += "; " + n.DescribeFrame(f.PID)
	}
	return s
}

// DescribeStuck describes up to limit frames that have a request
// outstanding or workers waiting (for reports when progress stops).
func (n *Node) DescribeStuck(limit int) string {
	s := ""
	for i := range n.cache.Frames() {
		f := n.cache.Frame(i)
		if f.Pending == protocol.ModeNone && !n.cache.HasWaiters(f) {
			continue
		}
		if limit == 0 {
			return s + "; ..."
		}
		limit--
		s += "; " + n.DescribeFrame(f.PID)
	}
	return s
}
