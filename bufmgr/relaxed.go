//go:build !race

package bufmgr

import (
	"sync/atomic"
	"unsafe"
)

// storeRelaxed sets *p to v with a plain store. Go's atomic stores are
// sequentially consistent, which on amd64 is an XCHG: a full fence that
// makes every later load wait for every earlier miss, so the next page's
// misses cannot overlap this one's. The LRU stamp needs no order (a stale
// stamp only makes a page look older to the page provider), and an aligned
// 8-byte store cannot tear. Readers use atomic loads; the race detector
// would report the mix, so race builds use the atomic store
// (relaxed_race.go).
func storeRelaxed(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }
