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
	// (a worker that serves its node's messages while it waits). Pauses
	// are then spent so whatever their length, until the wait has lasted
	// longWait (see Sleep).
	Idle func()

	// A wait is a run of Sleeps less than waitGap apart (the polls of one
	// reply slot): it started at waitStart; the last Sleep ended at
	// lastEnd.
	waitStart, lastEnd time.Time
}

const (
	// waitGap separates two waits: a thread that ran this long between
	// two Sleeps did something else.
	waitGap = 5 * time.Microsecond
	// longWait is how long a thread with Idle spins before its pauses go
	// to the OS's timer: a peer that has not answered by then is most
	// likely a process without a CPU (more busy threads than cores), and
	// the spinner holds the CPU it needs. With a core each, waits end
	// well before (p99 about 30 us).
	longWait = 200 * time.Microsecond
	// minNap is the shortest such pause.
	minNap = 20 * time.Microsecond
)

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
// With Idle, every pause is spun so (serving the node meanwhile) until the
// wait passes longWait; from then on each pause sleeps in the OS, which
// gives the CPU to the peer that is to answer.
func (g *GoroutineWaiter) Sleep(ns int64) {
	if ns >= 50_000 && g.Idle == nil {
		time.Sleep(time.Duration(ns))
		return
	}
	now := time.Now()
	if now.Sub(g.lastEnd) > waitGap {
		g.waitStart = now
	}
	defer func() { g.lastEnd = time.Now() }()
	if g.Idle != nil && now.Sub(g.waitStart) > longWait {
		g.Idle()
		time.Sleep(max(time.Duration(ns), minNap))
		return
	}
	deadline := now.Add(time.Duration(ns))
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
