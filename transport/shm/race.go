//go:build linux && race

package shm

import "sync/atomic"

// The race detector ignores atomics on memory outside the Go heap, so it
// cannot see that publishing a record (an atomic store of tail in the
// segment) happens before the reader's handler runs. Without help it would
// report every handler that reads what its sender wrote before Send as a
// race. In race builds every publish therefore also releases, and every
// consume acquires, this heap word: too much synchronization (it orders all
// rings), never too little.
var raceEdge atomic.Uint64

func raceRelease() { raceEdge.Add(1) }
func raceAcquire() { raceEdge.Load() }
