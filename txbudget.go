package scalestore

import "sync"

// pinBudget bounds how many cache frames the commits of a node's
// transactions hold latched at once (half the cache): a commit latches a
// leaf per key, and commits that together latched every frame would wait
// for a free frame forever. A commit takes its share before it latches
// anything and gives it back after, so waiting for the budget never holds
// a latch.
type pinBudget struct {
	mu    sync.Mutex
	cond  sync.Cond
	total int
	used  int
}

func newPinBudget(frames int) *pinBudget {
	b := &pinBudget{total: max(frames/2, 1)}
	b.cond.L = &b.mu
	return b
}

// take waits until n frames are free in the budget and takes them; false
// if n exceeds the whole budget.
func (b *pinBudget) take(n int) bool {
	if n > b.total {
		return false
	}
	b.mu.Lock()
	for b.used+n > b.total {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
	return true
}

func (b *pinBudget) give(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}
