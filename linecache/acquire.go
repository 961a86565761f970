package linecache

import (
	"fmt"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// acquire gets the global ownership step needs for f's line, with f busy
// (remote) so that no local thread and no invalidation touches it (§4.3).
func (c *Cache) acquire(t *Thread, f *frame, step selcc.Step) error {
	line := f.line
	r, off := c.cfg.Memory[line.Dir()], WordOffset(line.Slot())
	me := c.cfg.Self
	for n := 1; ; n++ {
		atomic.AddUint64(&c.Stats.Acquires, 1)
		for m := atomic.LoadUint64(&c.Stats.MaxWaitRetries); uint64(n) > m; m = atomic.LoadUint64(&c.Stats.MaxWaitRetries) {
			if atomic.CompareAndSwapUint64(&c.Stats.MaxWaitRetries, m, uint64(n)) {
				break
			}
		}
		var out selcc.Outcome
		var want selcc.Access
		switch step {
		case selcc.AcquireSharedStep:
			want = selcc.Read
			if wait := c.holdOff(f); wait > 0 {
				t.P.Sleep(wait)
			}
			// The FAA and the READ in one round trip (Fig. 6a): the READ
			// is posted behind the FAA, so it sees the line after it.
			prev := c.faa(t, r, off, selcc.AcquireShared(me))
			c.read(t, f.data, r, off+DataOffset)
			if _, err := c.await(t); err != nil {
				return err
			}
			out = selcc.AfterShared(me, selcc.Word(*prev))
			if out.Granted {
				atomic.AddUint64(&c.Stats.BytesFromMemory, LineSize)
				c.setMemo(f, selcc.SharedCopy, false)
				return nil
			}
			if !fire(c.cfg.Mutations.SkipUndo) {
				// The undo completes before the invalidation is sent: a
				// holder that hands the line over to us by FAA must not
				// find our bit set (latch.go's rule).
				c.faa(t, r, off, out.Undo)
				if _, err := c.await(t); err != nil {
					return err
				}
			}
		case selcc.AcquireExclusiveStep:
			want = selcc.Write
			expect, install := selcc.AcquireExclusive(me)
			prev := c.cas(t, r, off, uint64(expect), uint64(install))
			c.read(t, f.data, r, off+DataOffset)
			if _, err := c.await(t); err != nil {
				return err
			}
			out = selcc.AfterCAS(me, expect, selcc.Word(*prev))
			if out.Granted {
				atomic.AddUint64(&c.Stats.BytesFromMemory, LineSize)
				c.setMemo(f, selcc.Modified, false)
				return nil
			}
		case selcc.UpgradeStep:
			want = selcc.Write
			atomic.AddUint64(&c.Stats.Upgrades, 1)
			expect, install := selcc.Upgrade(me)
			prev := c.cas(t, r, off, uint64(expect), uint64(install))
			if _, err := c.await(t); err != nil {
				return err
			}
			w := selcc.Word(*prev)
			out = selcc.AfterCAS(me, expect, w)
			if out.Granted {
				c.setMemo(f, selcc.Modified, false)
				return nil
			}
			if !w.HasReader(me) || out.HasHolder {
				return fmt.Errorf("%w: node %d upgrades %v from a shared copy, but the latch word is %v", ErrLost, me, line, w)
			}
			if n >= c.cfg.UpgradeTries {
				// Two upgraders drop each other's invalidations: give the
				// copy up and acquire from scratch (the fallback of §4.3.2).
				atomic.AddUint64(&c.Stats.UpgradeFallbacks, 1)
				c.setMemo(f, selcc.Invalid, false)
				c.faa(t, r, off, selcc.ReleaseShared(me))
				if _, err := c.await(t); err != nil {
					return err
				}
				step = selcc.AcquireExclusiveStep
				continue
			}
		}
		if out.HasHolder && out.Holder == me {
			return fmt.Errorf("%w: node %d finds itself the holder of %v without a Modified memo", ErrLost, me, line)
		}
		reply, err := c.invalidate(t, f, out, want, n)
		if err != nil {
			return err
		}
		switch reply {
		case selcc.HandedOverExclusive:
			c.setMemo(f, selcc.Modified, true) // the line is dirty: memory never saw it
			return nil
		case selcc.HandedOverShared:
			c.setMemo(f, selcc.SharedCopy, false)
			return nil
		case selcc.Released:
			continue // every reader let go: the CAS may succeed now
		}
		t.P.Sleep(selcc.Backoff(c.cfg.RTT, n)/2 + int64(c.rand(t, n)))
	}
}

// rand spreads the retries of nodes that collided (deterministic: the
// slot's round counter and retry, not a clock).
func (c *Cache) rand(t *Thread, n int) uint64 {
	x := uint64(c.rounds[t.Slot])*0x9E3779B97F4A7C15 ^ uint64(n)<<32 ^ uint64(c.cfg.Self)<<48
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return x % uint64(selcc.Backoff(c.cfg.RTT, n)/2+1)
}

func (c *Cache) setMemo(f *frame, m selcc.Memo, dirty bool) {
	c.mu.Lock()
	f.memo, f.dirty = m, dirty
	c.noteMemo(f.line)
	c.mu.Unlock()
}

// holdOff is how long a shared acquire of f's line waits for a starved
// writer (§5.3.2).
func (c *Cache) holdOff(f *frame) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := f.holdOff - c.cfg.Now(); d > 0 {
		atomic.AddUint64(&c.Stats.HoldOffs, 1)
		return d
	}
	return 0
}

// invalidate sends the invalidations out asks for and waits for every
// reply in t's slot (§4.4, §5.1). It returns the strongest reply: a
// handover (its data is in f), Released when every target released, or
// Dropped. Each call is the slot's next round; a status word counts only
// if it carries that round, so a reply of an older round (still in the
// slot) is never taken for this one's.
func (c *Cache) invalidate(t *Thread, f *frame, out selcc.Outcome, want selcc.Access, prio int) (selcc.Reply, error) {
	targets := out.Targets()
	if len(targets) == 0 {
		return selcc.Dropped, nil // the word changed under us: retry
	}
	c.mu.Lock()
	if c.slotInUse[t.Slot] {
		c.mu.Unlock()
		return 0, fmt.Errorf("linecache: node %d: two threads invalidate through reply slot %d at once", c.cfg.Self, t.Slot)
	}
	c.slotInUse[t.Slot] = true
	c.rounds[t.Slot]++
	round := c.rounds[t.Slot]
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.slotInUse[t.Slot] = false
		c.mu.Unlock()
	}()
	mode := protocol.ModeShared
	if want == selcc.Write {
		mode = protocol.ModeExclusive
	}
	for _, n := range targets {
		if int(n) >= len(c.cfg.Computes) {
			return 0, fmt.Errorf("%w: the latch word of %v names node %d of %d", ErrLost, f.line, n, len(c.cfg.Computes))
		}
		m := protocol.Message{Type: protocol.TLineInvalidate, From: c.cfg.ID, To: c.cfg.Computes[n], Mode: mode,
			PID: f.line, Epoch: uint32(prio), K: uint32(t.Slot), Pred: round}
		if err := c.cfg.Send(&m); err != nil {
			return 0, fmt.Errorf("linecache: invalidating %v on node %d: %w", f.line, n, err)
		}
		atomic.AddUint64(&c.Stats.Invalidations, 1)
	}
	best := selcc.Released
	for _, n := range targets {
		var r selcc.Reply
		for {
			if r = selcc.ParseStatus(c.status(t.Slot, n), round); r != selcc.NoReply {
				break
			}
			if c.cfg.PollEvery < 0 {
				// The runtime tells of every reply that lands (Landed):
				// the polls that would find nothing are skipped.
				c.mu.Lock()
				c.polling[t.Slot] = t
				c.mu.Unlock()
				t.P.Park()
				continue
			}
			t.P.Sleep(c.cfg.PollEvery)
		}
		switch {
		case r.Forwards():
			best = r
			copy(f.data, c.cfg.ReplyMem[t.Slot*SlotSize:t.Slot*SlotSize+LineSize])
		case r == selcc.Dropped:
			atomic.AddUint64(&c.Stats.Dropped, 1)
			if best == selcc.Released {
				best = selcc.Dropped
			}
		}
	}
	return best, nil
}
