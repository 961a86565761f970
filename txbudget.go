package scalestore

import (
	"sync"
	"sync/atomic"
)

// pinBudget bounds how many cache frames the commits of a node's
// transactions hold latched at once (half the cache): a commit latches a
// leaf per key, and commits that together latched every frame would wait
// for a free frame forever. A commit takes its share before it latches
// anything and gives it back after, so waiting for the budget never holds
// a latch. Taking and giving is one atomic operation while the budget
// suffices; commits wait on the mutex only when it runs out.
type pinBudget struct {
	total   int64
	used    atomic.Int64
	waiters atomic.Int64
	mu      sync.Mutex
	cond    sync.Cond
}

func newPinBudget(frames int) *pinBudget {
	b := &pinBudget{total: int64(max(frames/2, 1))}
	b.cond.L = &b.mu
	return b
}

// take waits until n frames are free in the budget and takes them; false
// if n exceeds the whole budget.
func (b *pinBudget) take(n int) bool {
	want := int64(n)
	if want > b.total {
		return false
	}
	if b.tryTake(want) {
		return true
	}
	b.mu.Lock()
	b.waiters.Add(1)
	for !b.tryTake(want) {
		b.cond.Wait()
	}
	b.waiters.Add(-1)
	b.mu.Unlock()
	return true
}

func (b *pinBudget) tryTake(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.total {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *pinBudget) give(n int) {
	b.used.Add(-int64(n))
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}
