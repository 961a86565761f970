package bufmgr

import "sync/atomic"

// HybridLatch combines a reader-writer latch with optimistic reads (paper
// §3.2): optimistic readers remember the version and validate it afterwards;
// they never write to the latch, so they cause no cache-line invalidations.
// The version changes whenever an exclusive holder releases the latch, which
// covers every modification and every ownership change of the frame.
//
// The latch never blocks: callers that fail to acquire it wait through their
// Parker and retry, so it works the same inside the simulator.
type HybridLatch struct {
	version atomic.Uint64
	state   atomic.Int64 // -1 exclusive, n > 0 shared holders, 0 free
}

// TryLockShared takes a shared latch if no exclusive holder is in.
func (l *HybridLatch) TryLockShared() bool {
	for {
		s := l.state.Load()
		if s < 0 {
			return false
		}
		if l.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// UnlockShared releases a shared latch; it reports whether the latch is now
// free.
func (l *HybridLatch) UnlockShared() bool {
	n := l.state.Add(-1)
	if n < 0 {
		panic("bufmgr: shared unlock of a latch not held shared")
	}
	return n == 0
}

// TryLockExclusive takes the exclusive latch if nobody holds the latch.
func (l *HybridLatch) TryLockExclusive() bool { return l.state.CompareAndSwap(0, -1) }

// TryUpgrade turns the caller's shared latch into an exclusive one when it is
// the only shared holder.
func (l *HybridLatch) TryUpgrade() bool { return l.state.CompareAndSwap(1, -1) }

// UnlockExclusive releases the exclusive latch and moves the version on.
func (l *HybridLatch) UnlockExclusive() {
	l.version.Add(1)
	if !l.state.CompareAndSwap(-1, 0) {
		panic("bufmgr: exclusive unlock of a latch not held exclusive")
	}
}

// UnlockExclusiveUnchanged releases an exclusive latch whose holder changed
// nothing (a hot-path worker backing off): the version stays, so optimistic
// readers need not restart.
func (l *HybridLatch) UnlockExclusiveUnchanged() {
	if !l.state.CompareAndSwap(-1, 0) {
		panic("bufmgr: exclusive unlock of a latch not held exclusive")
	}
}

// DowngradeUnchanged turns an exclusive latch taken by TryUpgrade back into
// the caller's shared one, without moving the version.
func (l *HybridLatch) DowngradeUnchanged() {
	if !l.state.CompareAndSwap(-1, 1) {
		panic("bufmgr: downgrade of a latch not held exclusive")
	}
}

// Downgrade turns an exclusive latch into a shared one, moving the version on
// (the holder may have modified the page).
func (l *HybridLatch) Downgrade() {
	l.version.Add(1)
	if !l.state.CompareAndSwap(-1, 1) {
		panic("bufmgr: downgrade of a latch not held exclusive")
	}
}

// Optimistic returns the current version; ok is false while an exclusive
// holder is in.
func (l *HybridLatch) Optimistic() (v uint64, ok bool) {
	if l.state.Load() < 0 {
		return 0, false
	}
	return l.version.Load(), true
}

// Validate reports whether no exclusive holder came and went since Optimistic
// returned v and none is in now.
func (l *HybridLatch) Validate(v uint64) bool {
	return l.state.Load() >= 0 && l.version.Load() == v
}

// Version is the current version.
func (l *HybridLatch) Version() uint64 { return l.version.Load() }

// Free reports whether nobody holds the latch.
func (l *HybridLatch) Free() bool { return l.state.Load() == 0 }

// HeldExclusive reports whether an exclusive holder is in.
func (l *HybridLatch) HeldExclusive() bool { return l.state.Load() < 0 }
