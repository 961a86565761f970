//go:build linux

package shm

import (
	"sync/atomic"
	"time"
)

// Readers that nap while workers poll (run to completion, docs/cluster.md).
//
// When a node's workers poll the rings themselves, a parked reader is only
// needed while no worker polls; yet every message the peer sends finds it
// parked (it consumed nothing) and pays a futex wake-up, which on a VM is
// an interrupt on the reader's CPU, a context switch that takes that CPU
// from the worker polling there, and, for the waker, a system call. With
// workers active, a reader that finds nothing instead naps: it sleeps for
// napTimeout without telling producers it waits, so nobody wakes it, and
// looks again. A reader naps only while the node's workers make progress
// (Activity counts the operations they start) and none of them is parked
// waiting for the protocol (the runtime calls WorkerParks before a worker
// sleeps, which wakes the nappers: that worker's reply needs a reader that
// producers wake at once). Otherwise it parks as before.

// napTimeout is how long a napping reader sleeps before it looks again: a
// message that arrives while every worker is inside a long operation waits
// at most this long.
const napTimeout = time.Millisecond

// napping returns the workers' activity counter and whether readers may
// nap now (a counter is set and no worker is parked).
func (t *Transport) napping() (activity *atomic.Uint64, ok bool) {
	a := t.activity.Load()
	return a, a != nil && t.parkedWorkers.Load() == 0
}

// SetActivity makes the readers nap while the counter moves (see above).
func (t *Transport) SetActivity(ops *atomic.Uint64) { t.activity.Store(ops) }

// WorkerParks and WorkerRuns bracket a worker's sleep while it waits for
// the protocol: readers stop napping (and the nappers are woken) while one
// is parked.
func (t *Transport) WorkerParks() {
	if t.parkedWorkers.Add(1) == 1 {
		t.napWord.Store(1)
		futexWakeAll(&t.napWord)
	}
}

// WorkerRuns ends WorkerParks.
func (t *Transport) WorkerRuns() { t.parkedWorkers.Add(-1) }

// nap sleeps up to napTimeout unless a worker parks meanwhile.
func (t *Transport) nap() {
	t.naps.Add(1)
	t.napWord.Store(0)
	if t.parkedWorkers.Load() == 0 {
		futexSleep(&t.napWord, 0, napTimeout)
	}
}
