package linecache

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// Deliver queues an invalidation for the node's handler thread (Serve).
// It never waits: the inbox holds one message per sending thread of the
// cluster, the most that can be in flight to a node, so a full inbox is a
// broken sender and an error.
func (c *Cache) Deliver(m *protocol.Message) error {
	if m.Type != protocol.TLineInvalidate {
		return fmt.Errorf("linecache: node %d got %v: compute nodes take invalidations only", c.cfg.Self, m.Type)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == len(c.inbox) {
		return fmt.Errorf("linecache: node %d: inbox full (%d invalidations): a sender has more than one in flight", c.cfg.Self, c.n)
	}
	c.inbox[(c.head+c.n)%len(c.inbox)] = *m
	c.n++
	atomic.AddUint64(&c.Stats.InvalidationsRecv, 1)
	if c.idle && c.inline == 0 {
		c.idle = false
		c.handler.P.Wake()
	}
	return nil
}

// Serve is the node's invalidation handler: it answers every message
// Deliver queued, and parks while there is none. It returns when stop
// reports true after a wake.
func (c *Cache) Serve(t *Thread, stop func() bool) {
	c.mu.Lock()
	c.handler = t
	for {
		if c.n == 0 {
			if stop != nil && stop() {
				c.mu.Unlock()
				return
			}
			c.idle = true
			c.mu.Unlock()
			t.P.Park()
			c.mu.Lock()
			continue
		}
		c.mu.Unlock()
		c.serving.Lock()
		m, ok := c.next()
		if ok {
			if err := c.handle(t, &m); err != nil {
				panic(err) // a broken invariant of this node: the runtime reports it as the node's fault
			}
		}
		c.serving.Unlock()
		c.mu.Lock()
	}
}

// next takes the oldest invalidation from the inbox.
func (c *Cache) next() (protocol.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return protocol.Message{}, false
	}
	m := c.inbox[c.head]
	c.head = (c.head + 1) % len(c.inbox)
	c.n--
	return m, true
}

// Run to completion on real processes: a worker that waits (for a reply,
// a retry's back-off) or is between operations consumes what its peers
// sent and answers the invalidations itself, so that an invalidation is
// not left to a handler goroutine the OS has yet to give a CPU (on a small
// machine most of a round trip, or milliseconds). The protocol is the
// same: answers stay one at a time, in arrival order (Cache.serving), and
// the handler still serves whatever no worker took.

// BeginInline starts a worker's turn at serving: until EndInline, Deliver
// queues without waking the handler.
func (c *Cache) BeginInline() {
	c.mu.Lock()
	c.inline++
	c.mu.Unlock()
}

// ServeWaiting answers the invalidations in the inbox on the caller's
// goroutine, t being the handler thread for their verbs (not a thread
// that is in the middle of its own verbs). It never waits: while another
// goroutine answers one, it returns at once. The caller must hold nothing
// of the cache's (between operations, or while waiting in one).
func (c *Cache) ServeWaiting(t *Thread) (int, error) {
	if !c.serving.TryLock() {
		return 0, nil
	}
	defer c.serving.Unlock()
	n := 0
	for {
		m, ok := c.next()
		if !ok {
			return n, nil
		}
		if err := c.handle(t, &m); err != nil {
			return n, err
		}
		n++
	}
}

// EndInline ends BeginInline; an invalidation that arrived meanwhile and
// is still waiting gets the handler woken.
func (c *Cache) EndInline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inline--
	if c.inline == 0 && c.n > 0 && c.idle && c.handler != nil {
		c.idle = false
		c.handler.P.Wake()
	}
}

// WakeHandler wakes the handler thread so that it asks its stop
// function again.
func (c *Cache) WakeHandler() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handler != nil {
		c.idle = false
		c.handler.P.Wake()
	}
}

// handle answers one invalidation (§4.4, §5.1): drop it, release a shared
// copy, or hand the Modified line over, and write the reply into the
// sender's slot after the FAA completed, so the sender's next verb sees
// the word the reply announces.
func (c *Cache) handle(t *Thread, m *protocol.Message) error {
	me := c.cfg.Self
	from, ok := c.compute(m.From)
	if !ok {
		return fmt.Errorf("linecache: node %d: an invalidation from node %d, which is no compute node", me, m.From)
	}
	want := selcc.Read
	if m.Mode == protocol.ModeExclusive {
		want = selcc.Write
	}
	slot, round := int(m.K), m.Pred
	if (slot+1)*SlotSize > int(c.cfg.Replies[from].Len) {
		return fmt.Errorf("linecache: node %d: reply slot %d beyond node %d's reply region", me, slot, from)
	}
	c.mu.Lock()
	atomic.AddUint64(&c.Stats.HandlerCalls, 1)
	f := c.table[m.PID]
	memo, busy := selcc.Invalid, false
	if f != nil {
		memo, busy = f.memo, f.busy()
		if busy {
			f.contended = true
		}
		if c.cfg.Priority && want == selcc.Write && m.Epoch >= 2 && memo != selcc.Modified {
			// A writer retried: this node's readers let it in first.
			f.holdOff = max(f.holdOff, c.cfg.Now()+int64(m.Epoch)*c.cfg.RTT)
		}
	}
	resp := selcc.OnInvalidate(me, memo, busy, from, want)
	if resp.Reply == selcc.Dropped {
		c.mu.Unlock()
		// The reply's completion is not waited for (the handler goes on
		// with the next message); a failure shows at the next await.
		c.reply(t, from, slot, round, resp.Reply, nil)
		return nil
	}
	keep := resp.Reply == selcc.Released && fire(c.cfg.Mutations.ReleaseKeepsCopy)
	if !keep {
		f.memo = resp.Memo
		c.noteMemo(f.line)
	}
	dirty := f.dirty
	f.dirty = false
	f.remote = true
	c.mu.Unlock()

	r, off := c.cfg.Memory[m.PID.Dir()], WordOffset(m.PID.Slot())
	if resp.Flush && dirty && !fire(c.cfg.Mutations.ShareWithoutFlush) {
		c.write(t, r, off+DataOffset, f.data)
		atomic.AddUint64(&c.Stats.BytesToMemory, LineSize)
	}
	if !(resp.Reply == selcc.HandedOverExclusive && fire(c.cfg.Mutations.HandOverWithoutFAA)) {
		c.faa(t, r, off, resp.Delta)
	}
	_, err := c.await(t)
	if err == nil {
		var data []byte
		if resp.Reply.Forwards() {
			data = f.data
			atomic.AddUint64(&c.Stats.HandOvers, 1)
			atomic.AddUint64(&c.Stats.BytesForwarded, LineSize)
		} else {
			atomic.AddUint64(&c.Stats.Releases, 1)
		}
		c.reply(t, from, slot, round, resp.Reply, data) // copied when posted
	}
	c.mu.Lock()
	f.remote = false
	c.wakeAll(&f.waiters)
	c.wakeAll(&c.waiting)
	c.mu.Unlock()
	return err
}

// reply writes the forwarded data (if any), then the status word, into
// slot of node to's reply region: the status lands after the data.
func (c *Cache) reply(t *Thread, to selcc.Node, slot int, round uint32, r selcc.Reply, data []byte) {
	reg := c.cfg.Replies[to]
	if data != nil {
		c.write(t, reg, uint64(slot*SlotSize), data)
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], selcc.Status(round, r))
	c.write(t, reg, statusOffset(slot, c.cfg.Self), w[:])
}

func (c *Cache) compute(id protocol.NodeID) (selcc.Node, bool) {
	for i, n := range c.cfg.Computes {
		if n == id {
			return selcc.Node(i), true
		}
	}
	return 0, false
}
