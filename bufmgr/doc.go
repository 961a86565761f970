// Package bufmgr is a node's local page cache: frames with ownership
// metadata, the translation table from PID to frame, the hybrid latch
// (optimistic version, shared, exclusive), the guards application code uses
// to reach pages (paper §5.1), epoch-based LRU stamping and the page
// provider's sampling of eviction candidates (paper §4).
//
// What happens on a miss (an ownership request, a transfer) is not decided
// here: the cache calls its Remote, which the node runtime implements with
// the protocol. Blocking goes through the Worker's Parker, which the
// simulator implements with coroutines and the real world with goroutines.
//
// It may import protocol only; never a transport, a storage engine or the
// simulator.
package bufmgr
