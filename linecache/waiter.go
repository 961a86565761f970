package linecache

import (
	"runtime"
	"time"
)

// GoroutineWaiter is a Waiter for a thread that is a goroutine (real
// transports): Park waits for a Wake, a Wake before the Park is kept.
type GoroutineWaiter struct {
	ch chan struct{}
	// Idle, when set, runs at every look at the clock while Sleep waits
	// (a worker that serves its node's messages while it waits), and a
	// pause of any length is spent so, never in the OS's timer.
	Idle func()
}

// NewGoroutineWaiter makes a waiter for one goroutine.
func NewGoroutineWaiter() *GoroutineWaiter { return &GoroutineWaiter{ch: make(chan struct{}, 1)} }

// Park implements Waiter.
func (g *GoroutineWaiter) Park() { <-g.ch }

// Wake implements Waiter.
func (g *GoroutineWaiter) Wake() {
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

// Sleep implements Waiter: short pauses (a poll of the reply slot, a
// retry's back-off) yield the processor until the deadline instead of
// asking the OS for a timer, which on Linux costs tens of microseconds.
func (g *GoroutineWaiter) Sleep(ns int64) {
	if ns >= 50_000 && g.Idle == nil {
		time.Sleep(time.Duration(ns))
		return
	}
	deadline := time.Now().Add(time.Duration(ns))
	for {
		if g.Idle != nil {
			g.Idle()
		}
		if !time.Now().Before(deadline) {
			return
		}
		runtime.Gosched()
	}
}

// MaybeYield implements Waiter: the OS scheduler interleaves real threads.
func (g *GoroutineWaiter) MaybeYield() {}
