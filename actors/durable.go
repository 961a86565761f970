package actors

import (
	"fmt"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Deferred write-throughs: release before durable (docs/durability.md,
// "Group commit").
//
// Persist holds the page's exclusive latch until its write has landed, so
// two writes of one leaf never share a device write: the second waits for
// the first's. On a node whose pages no other node can ever hold (a
// cluster of one node, SetDeferDurable), that wait under the latch buys
// nothing: no copy of the page leaves the node, so the only ones who can
// see the new value are this node's own callers, and they are made to wait
// instead. PersistDeferred issues the page's write (into the store's write
// log, where writes that come together share one log write) and returns a
// ticket at once; the caller releases the latch, and before it answers its
// client it waits until every ticket up to its own is durable
// (WaitDurable). A caller that only read waits for the tickets issued
// before its read ended (Issued): a value it saw may be one of them. So
// nobody is told of a write before it is durable, and a write the process
// died before landing was never told to anybody. The store keeps its writes
// in order (a write log keeps a prefix of them), so a later write of the
// page never lands without an earlier one.

// deferState is the node's record of its deferred write-throughs.
type deferState struct {
	on bool
	// issued is the newest ticket; pending the tickets not durable yet,
	// in the order they were issued.
	issued  uint64
	pending []uint64
	waiters []durableWaiter
	// unsettled mirrors issued > Durable(), issuedNow issued, for callers
	// without the lock (Local.Unsettled, Ticket).
	unsettled atomic.Bool
	issuedNow atomic.Uint64
}

type durableWaiter struct {
	w *bufmgr.Worker
	t uint64
}

// SetDeferDurable lets write-throughs of this node's own pages return
// before they are durable (PersistDeferred). Only for a node whose pages
// no other node can hold: a cluster of one node.
func (n *Node) SetDeferDurable(on bool) { n.deferred.on = on }

// Issued is the newest ticket PersistDeferred gave out.
func (n *Node) Issued() uint64 { return n.deferred.issued }

// Durable is the newest ticket t such that every ticket up to t is durable.
func (n *Node) Durable() uint64 {
	d := &n.deferred
	if len(d.pending) > 0 {
		return d.pending[0] - 1
	}
	return d.issued
}

// PersistDeferred issues the write-through of the page of f, which w holds
// exclusively, and returns its ticket without waiting for it (ok false:
// the write cannot be deferred here, and the caller persists it as
// Persist does). The caller may release the latch at once; it must not
// tell anyone of the write before WaitDurable(ticket).
func (n *Node) PersistDeferred(f *bufmgr.Frame) (ticket uint64, ok bool) {
	d := &n.deferred
	if !d.on || f.Mode != protocol.ModeExclusive || n.route[f.PID.Dir()] != n.id || n.hasBackup.Has(f.PID.Dir()) ||
		n.cfg.Mutations.NoWriteThrough != nil || n.dead {
		return 0, false
	}
	d.issued++
	t := d.issued
	d.pending = append(d.pending, t)
	d.issuedNow.Store(t)
	d.unsettled.Store(true)
	n.writeDurable(f.PID, n.cache.Page(f), func() { n.deferredDone(t) })
	return t, true
}

// deferredDone marks ticket t durable and wakes the workers that waited
// for it.
func (n *Node) deferredDone(t uint64) {
	d := &n.deferred
	for i, p := range d.pending {
		if p == t {
			d.pending = append(d.pending[:i], d.pending[i+1:]...)
			break
		}
	}
	dur := n.Durable()
	if dur == d.issued {
		d.unsettled.Store(false)
	}
	k := 0
	for _, wt := range d.waiters {
		if wt.t <= dur {
			wt.w.P.Wake()
			continue
		}
		d.waiters[k] = wt
		k++
	}
	clear(d.waiters[k:])
	d.waiters = d.waiters[:k]
}

// WaitDurable parks w until every ticket up to t is durable.
func (n *Node) WaitDurable(w *bufmgr.Worker, t uint64) {
	for n.Durable() < t {
		n.deferred.waiters = append(n.deferred.waiters, durableWaiter{w, t})
		w.P.Park()
	}
}

// PersistDeferred is Persist without the wait, where the node defers
// write-throughs (SetDeferDurable): it records the write's ticket in w
// (Worker.Durable) for WaitDurable. Elsewhere it is Persist.
func (l *Local) PersistDeferred(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error {
	var t uint64
	var ok bool
	l.Locked(func() { t, ok = l.node.PersistDeferred(g.Frame()) })
	if !ok {
		return l.Persist(w, g)
	}
	w.Durable = max(w.Durable, t)
	return nil
}

// PersistAllDeferred is PersistAll without the wait (PersistDeferred of
// every page, in order: one store keeps them in order).
func (l *Local) PersistAllDeferred(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error {
	var t uint64
	ok := true
	l.Locked(func() {
		for i, g := range gs {
			var okOne bool
			if t, okOne = l.node.PersistDeferred(g.Frame()); !okOne {
				if i > 0 {
					l.node.violation("%v: deferring %d pages of one write-through: page %d could not be deferred", g.Frame().PID, len(gs), i)
				}
				ok = false
				return
			}
		}
	})
	if !ok {
		return l.PersistAll(w, gs...)
	}
	w.Durable = max(w.Durable, t)
	return nil
}

// Unsettled reports whether w's call must Settle before it answers: it
// deferred a write, or some deferred write is not durable yet. It takes no
// lock.
func (l *Local) Unsettled(w *bufmgr.Worker) bool {
	return w.Durable != 0 || l.node.deferred.unsettled.Load()
}

// Ticket takes the ticket w's call must be durable up to before anybody
// hears of it (0: none), as Settle would wait for it, and clears w's.
func (l *Local) Ticket(w *bufmgr.Worker) uint64 {
	t := w.Durable
	w.Durable = 0
	if t == 0 && l.node.deferred.unsettled.Load() {
		t = l.node.deferred.issuedNow.Load()
	}
	return t
}

// SettleTo waits until every deferred write-through up to ticket t is
// durable (Ticket's); from within DoAs.
func (l *Local) SettleTo(w *bufmgr.Worker, t uint64) error {
	if t == 0 {
		return nil
	}
	w.Durable = t
	return l.Settle(w)
}

// Settle waits, at the end of a call of w, until nothing the call wrote or
// read is less durable than a write-through: its own deferred writes
// (Worker.Durable), or, if it wrote none, every deferred write issued
// before now (it may have read one). It is called from within DoAs.
func (l *Local) Settle(w *bufmgr.Worker) error {
	t := w.Durable
	w.Durable = 0
	var err error
	l.Locked(func() {
		if t == 0 {
			t = l.node.Issued()
		}
		if l.node.Durable() >= t {
			return
		}
		l.node.WaitDurable(w, t)
		if l.err != nil {
			err = fmt.Errorf("node %d: waiting for deferred write-throughs: %w", l.node.ID(), l.err)
		}
	})
	return err
}
