// Package bufmgr is a node's local page cache: frames with ownership
// metadata, the translation table from PID to frame, the hybrid latch
// (optimistic version, shared, exclusive), the guards application code uses
// to reach pages (paper §5.1), epoch-based LRU stamping and the page
// provider's sampling of eviction candidates (paper §4).
//
// # Two paths
//
// The hot path (paper §3.2) serves a page that is cached in a sufficient
// mode with nothing pending on it: a lock-free lookup in the partitioned
// translation table (each bucket has an optimistic latch, a version that
// readers check and never write), then the frame's hybrid latch, then a
// check of the frame's fast word, the mode in which the hot path may use it.
// It allocates nothing and takes no lock; optimistic readers write no shared
// memory at all, and the LRU stamp is stored only when it is behind.
//
// Each page has a home frame, computed from its PID (consecutive slots,
// consecutive homes), which it gets whenever that frame is free. The
// lookup reads the home frame first and walks the bucket's chain only when
// the page is not there. When the pages outnumber the CPU's cache lines
// both the bucket and the frame miss, one after the other; a page at home
// costs the frame's miss alone, overlapped with its page's (the page's
// address is computed from the frame's index). A store that fits in the
// cache has nearly all its pages at home. When it does not, the homes are
// mostly taken, and the wasted read of the home frame costs one miss per
// lookup next to the miss of the page from the SSD.
//
// Everything else (a miss, an upgrade of ownership, a transfer queued by
// another node, an eviction, a worker that must wait) takes the slow path,
// which runs under the node runtime's lock (Cache.SetLocker) together with
// the protocol. The slow path closes the hot path of a frame (its fast word
// goes to ModeNone) before any change that narrows what a latch holder may
// do, and only then looks at the latch; a hot-path worker latches first and
// reads the fast word second. With sequentially consistent atomics one side
// always sees the other: the protocol finds the latch taken and waits for
// its release, or the worker finds the frame slow and backs off (without
// touching the page). A frame's hot path opens again when a slow-path
// acquisition finds nothing pending.
//
// In the simulator there is no lock (one worker runs at a time) and the hot
// path runs too, so the same code is fuzzed there.
//
// Page memory is supplied by the caller: the simulator passes a Go slice,
// the real world one anonymous mmap (off the Go heap, page-aligned, backed
// by transparent huge pages where the kernel offers them).
//
// # Unreadable pages
//
// A copy the runtime marks Unreadable (its directory could not read the
// page from the SSD) keeps its frame's mode for the protocol but fails
// every guard on it with a *PageError, and its hot path stays closed, so
// the check costs nothing on hits. The guard constructors have no error
// result (the B-tree's descent would pay for one on every level): they
// panic with the *PageError, and the runtime's worker loop recovers it
// (Catch) as the operation's error. That is why a caller must hold no latch
// when it calls Exclusive, Shared or Optimistic; the conversions (Upgrade,
// ToShared, ToExclusive), which callers do use while holding other latches,
// return the error instead.
//
// What happens on a miss (an ownership request, a transfer) is not decided
// here: the cache calls its Remote, which the node runtime implements with
// the protocol. Blocking goes through the Worker's Parker, which the
// simulator implements with coroutines and the real world with goroutines.
//
// It may import protocol and internal/prefetch only; never a transport, a
// storage engine or the simulator.
package bufmgr
