package actors

import (
	"sync"
	"sync/atomic"
)

// nodeLock is the real-world runtime's lock over the node (protocol state,
// directory, slow path of the cache). The I/O goroutine never waits for it:
// it posts completions and moves on to submit and reap, and whoever holds the
// lock runs the posted completions before releasing it (a combining lock);
// the I/O goroutine takes the lock itself only when it is free. With 32
// workers contending, the I/O goroutine used to wait about 100 µs for the
// lock per batch of completions, and new requests waited as long for it.
type nodeLock struct {
	mu      sync.Mutex
	pending atomic.Bool // completions were posted since the last drain
	drain   func()      // runs the posted completions; called with mu held
}

func (m *nodeLock) Lock() { m.mu.Lock() }

// Unlock runs posted completions, then releases the lock. A completion
// posted just after the last look is caught by the look after the release:
// the poster sets pending before it tries the lock, so either it gets the
// lock or this holder sees the flag (both sides are sequentially
// consistent atomics).
func (m *nodeLock) Unlock() {
	for {
		if m.pending.Load() {
			m.drain()
		}
		m.mu.Unlock()
		if !m.pending.Load() || !m.mu.TryLock() {
			return
		}
	}
}

// post announces completions and runs them now if the lock is free.
func (m *nodeLock) post() {
	m.pending.Store(true)
	if m.mu.TryLock() {
		m.Unlock()
	}
}
