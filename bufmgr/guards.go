package bufmgr

import "github.com/scalestore-go/scalestore/protocol"

// ExclusiveGuard holds a page latched exclusively in node-exclusive ownership:
// cluster-wide exclusive access (paper §5.1). The page is fixed until Release.
type ExclusiveGuard struct {
	c *Cache
	f *Frame
}

// Exclusive latches pid exclusively, fetching it (and invalidating other
// copies) through the protocol when needed.
// It panics with a *PageError when the page is unreadable (see PageError).
func (c *Cache) Exclusive(w *Worker, pid protocol.PID) ExclusiveGuard {
	f, _, err := c.acquire(w, pid, protocol.ModeExclusive, latchExclusive)
	if err != nil {
		panic(err)
	}
	return ExclusiveGuard{c, f}
}

// ExclusiveHeld is Exclusive for a caller that already holds the node
// runtime's lock (the node's own code, such as page allocation).
// It panics with a *PageError when the page is unreadable.
func (c *Cache) ExclusiveHeld(w *Worker, pid protocol.PID) ExclusiveGuard {
	w.P.MaybeYield()
	f, _, err := c.acquireHeld(w, pid, protocol.ModeExclusive, latchExclusive)
	if err != nil {
		panic(err)
	}
	return ExclusiveGuard{c, f}
}

// Data is the page, writable.
func (g *ExclusiveGuard) Data() []byte { return g.c.Page(g.f) }

// PID is the latched page.
func (g *ExclusiveGuard) PID() protocol.PID { return g.f.PID }

// Frame exposes the frame (for the runtime's bookkeeping and tests).
func (g *ExclusiveGuard) Frame() *Frame { return g.f }

// MarkDirty records that the page was modified.
func (g *ExclusiveGuard) MarkDirty() { g.f.Dirty = true }

// Release unlatches the page.
func (g *ExclusiveGuard) Release() {
	f := g.f
	g.f = nil
	if g.c.OnExclusiveRelease != nil {
		g.c.OnExclusiveRelease(f)
	}
	f.Latch.UnlockExclusive()
	if protocol.Mode(f.fast.Load()) != protocol.ModeExclusive {
		g.c.lockedRelease(f)
	}
}

// Downgrade keeps the page latched shared (node-exclusive ownership stays).
func (g *ExclusiveGuard) Downgrade() SharedGuard {
	f := g.f
	g.f = nil
	if g.c.OnExclusiveRelease != nil {
		g.c.OnExclusiveRelease(f)
	}
	f.Latch.Downgrade()
	if protocol.Mode(f.fast.Load()) != protocol.ModeExclusive {
		g.c.mu.Lock()
		g.c.wakeAll(f)
		g.c.mu.Unlock()
	}
	return SharedGuard{g.c, f, f.Latch.Version()}
}

// SharedGuard holds a page latched shared, in node-shared or node-exclusive
// ownership. The page is fixed until Release.
type SharedGuard struct {
	c       *Cache
	f       *Frame
	version uint64
}

// Shared latches pid shared, fetching a copy through the protocol when needed.
// It panics with a *PageError when the page is unreadable (see PageError).
func (c *Cache) Shared(w *Worker, pid protocol.PID) SharedGuard {
	f, _, err := c.acquire(w, pid, protocol.ModeShared, latchShared)
	if err != nil {
		panic(err)
	}
	return SharedGuard{c, f, f.Latch.Version()}
}

// Data is the page, read-only by contract.
func (g *SharedGuard) Data() []byte { return g.c.Page(g.f) }

// PID is the latched page.
func (g *SharedGuard) PID() protocol.PID { return g.f.PID }

// Release unlatches the page.
func (g *SharedGuard) Release() {
	f := g.f
	g.f = nil
	f.Latch.UnlockShared()
	if protocol.Mode(f.fast.Load()) == protocol.ModeNone {
		g.c.lockedRelease(f)
	}
}

// Upgrade turns the shared guard into an exclusive one. When the node holds
// the page exclusively and the caller is the only reader, it is a latch
// upgrade in place. Otherwise the shared latch is released first (holding it
// across a remote wait could deadlock with the invalidation the upgrade
// causes, paper §3.4.3), node-exclusive ownership is obtained, and if the page
// changed meanwhile the upgrade fails with ErrRestart and nothing stays
// latched. w must be the worker that took the shared guard.
func (g *SharedGuard) Upgrade(w *Worker) (ExclusiveGuard, error) {
	f, v, c := g.f, g.version, g.c
	g.f = nil
	if protocol.Mode(f.fast.Load()) == protocol.ModeExclusive && f.Latch.TryUpgrade() {
		if protocol.Mode(f.fast.Load()) == protocol.ModeExclusive {
			return ExclusiveGuard{c, f}, nil
		}
		f.Latch.DowngradeUnchanged() // the frame went slow meanwhile
	}
	c.mu.Lock()
	pid := f.PID
	if f.Mode == protocol.ModeExclusive && len(c.queues[f.index]) == 0 && f.Latch.TryUpgrade() {
		c.mu.Unlock()
		return ExclusiveGuard{c, f}, nil
	}
	f.Latch.UnlockShared()
	c.release(f)
	c.mu.Unlock()
	return c.exclusiveIfUnchanged(w, f, pid, v)
}

// exclusiveIfUnchanged latches pid exclusively and checks it is still in
// frame f at version v; ErrRestart (nothing latched) otherwise.
func (c *Cache) exclusiveIfUnchanged(w *Worker, f *Frame, pid protocol.PID, v uint64) (ExclusiveGuard, error) {
	xf, _, err := c.acquire(w, pid, protocol.ModeExclusive, latchExclusive)
	if err != nil {
		return ExclusiveGuard{}, err
	}
	x := ExclusiveGuard{c, xf}
	changed := f.Latch.Version() != v
	if changed && c.UpgradeIgnoresVersion != nil && c.UpgradeIgnoresVersion() {
		changed = false // mutation: the rule is broken on purpose
	}
	if x.f != f || changed {
		x.Release()
		c.restarts.Add(1)
		return ExclusiveGuard{}, ErrRestart
	}
	return x, nil
}

// OptimisticGuard reads a page without latching it (paper §3.2): the caller
// reads Data and then asks HasChanged; the page is not fixed and may be
// evicted or invalidated meanwhile, in which case HasChanged is true and the
// caller restarts.
type OptimisticGuard struct {
	c       *Cache
	f       *Frame
	pid     protocol.PID
	version uint64
}

// Optimistic makes pid available in at least node-shared ownership and
// remembers its version.
// It panics with a *PageError when the page is unreadable (see PageError).
func (c *Cache) Optimistic(w *Worker, pid protocol.PID) OptimisticGuard {
	f, v, err := c.acquire(w, pid, protocol.ModeShared, latchOptimistic)
	if err != nil {
		panic(err)
	}
	return OptimisticGuard{c, f, pid, v}
}

// Data is the page as it is now: only meaningful if HasChanged is false
// afterwards.
func (g *OptimisticGuard) Data() []byte { return g.c.Page(g.f) }

// HasChanged reports whether the page may have changed (or left this frame)
// since the guard was taken.
func (g *OptimisticGuard) HasChanged() bool {
	if g.c.SkipVersionCheck != nil && g.c.SkipVersionCheck() {
		return false // mutation: the rule is broken on purpose
	}
	// Every change of the frame's page or mode happens under its exclusive
	// latch and moves the version; the key check covers a frame reused for
	// another page without ever holding a copy.
	changed := !g.f.Latch.Validate(g.version) || g.f.key.Load() != tableKey(g.pid)
	if changed {
		g.c.restarts.Add(1)
	}
	return changed
}

// ToShared latches the page shared if it has not changed; ErrRestart
// otherwise.
func (g *OptimisticGuard) ToShared() (SharedGuard, error) {
	if g.HasChanged() || !g.f.Latch.TryLockShared() {
		return SharedGuard{}, ErrRestart
	}
	f := g.f
	if !f.Latch.Validate(g.version) {
		f.Latch.UnlockShared()
		g.c.lockedRelease(f)
		return SharedGuard{}, ErrRestart
	}
	if protocol.Mode(f.fast.Load()) == protocol.ModeNone {
		// The frame needs the protocol: a shared latch may only be kept if
		// no transfer or eviction waits for it (they wait for the latch).
		c := g.c
		c.mu.Lock()
		ok := f.Mode != protocol.ModeNone && !f.Evicting && len(c.queues[f.index]) == 0
		if !ok {
			f.Latch.UnlockShared()
			c.release(f)
		}
		c.mu.Unlock()
		if !ok {
			return SharedGuard{}, ErrRestart
		}
	}
	return SharedGuard{g.c, f, g.version}, nil
}

// ToExclusive latches the page exclusively (fetching node-exclusive
// ownership if needed) and checks that it has not changed since the
// optimistic guard was taken; ErrRestart otherwise, with nothing latched.
// The optimistic guard is spent either way.
func (g *OptimisticGuard) ToExclusive(w *Worker) (ExclusiveGuard, error) {
	f, pid, v := g.f, g.pid, g.version
	g.f = nil
	return g.c.exclusiveIfUnchanged(w, f, pid, v)
}

// Release forgets an optimistic guard (it holds no latch; this only makes
// accidental reuse fail loudly).
func (g *OptimisticGuard) Release() { g.f = nil }

// PID is the page the guard was taken on.
func (g *OptimisticGuard) PID() protocol.PID { return g.pid }
